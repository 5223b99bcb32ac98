// Drives test/helpers/gate-handler.ts: a model whose requests stay in flight until the test
// opens their gate, so "while it runs" is a state the test controls rather than a race.
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./server.js";

/** The compiled handler, for a model entry `{backend: custom, path: GATE_HANDLER, options: {dir}}`. */
export const GATE_HANDLER = join(REPO_ROOT, "dist", "test", "helpers", "gate-handler.js");

export interface Gate {
  /** The folder the handler watches (its `options.dir`). */
  dir: string;
  /** A YAML model entry for this gate. */
  modelYaml(name: string): string;
  /** Resolves once a request with row value `x` has reached the handler; rejects after `timeoutMs`. */
  started(x: number, timeoutMs?: number): Promise<void>;
  /** Lets requests with row value `x` finish. */
  open(x: number): void;
  /** Lets every request finish, now and later. */
  openAll(): void;
}

export function createGate(): Gate {
  const dir = mkdtempSync(join(tmpdir(), "modelport-gate-"));
  return {
    dir,
    modelYaml: (name) =>
      `  - {name: ${name}, backend: custom, path: "${GATE_HANDLER}", options: {dir: "${dir}"}}`,
    async started(x, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (!existsSync(join(dir, `started-${x}`))) {
        if (Date.now() > deadline)
          throw new Error(`no request with x=${x} reached the handler in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    open: (x) => writeFileSync(join(dir, `open-${x}`), ""),
    openAll: () => writeFileSync(join(dir, "open-all"), ""),
  };
}
