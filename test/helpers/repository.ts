// Writes model repositories for tests: DIR/NAME/VERSION/ folders holding a small handler that
// answers y = K·x (so each version's answers tell which version served), with a golden file
// that matches it, or on purpose does not.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function tempRepository(): string {
  return mkdtempSync(join(tmpdir(), "modelport-repo-"));
}

export interface ScaleVersion {
  /** The factor the version multiplies by. */
  k: number;
  /** Milliseconds each call takes (to have calls in flight during a swap). */
  delayMs?: number;
  /** The factor its golden file expects; default k (a mismatch fails the golden check). */
  goldenK?: number;
  /**
   * Holds calls whose x is `gate.x` (not the golden check's x = 1): each writes `started` into
   * `gate.dir`, then waits until `open` exists there, so a test controls when they finish.
   */
  gate?: { dir: string; x: number };
}

/** Writes DIR/NAME/VERSION/model.mjs and model.golden.json. */
export function writeScaleVersion(dir: string, name: string, version: string, v: ScaleVersion): string {
  const folder = join(dir, name, version);
  mkdirSync(folder, { recursive: true });
  const started = JSON.stringify(join(v.gate?.dir ?? "", "started"));
  const open = JSON.stringify(join(v.gate?.dir ?? "", "open"));
  const gate = v.gate
    ? `if (x.includes(${v.gate.x})) {
    (await import("node:fs")).writeFileSync(${started}, "");
    while (!(await import("node:fs")).existsSync(${open})) await new Promise((r) => setTimeout(r, 10));
  }`
    : "";
  writeFileSync(
    join(folder, "model.mjs"),
    `export function load() {
  return {
    inputs: [{ name: "x", datatype: "FP32", shape: [-1, 1] }],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1, 1] }],
    batchable: true,
  };
}
export async function predict(batch) {
  const x = batch.x.data;
  ${v.delayMs ? `await new Promise((r) => setTimeout(r, ${v.delayMs}));` : ""}
  ${gate}
  return { y: { datatype: "FP32", shape: [x.length, 1], data: Float32Array.from(x, (e) => e * ${v.k}) } };
}
`,
  );
  writeFileSync(
    join(folder, "model.golden.json"),
    JSON.stringify({
      inputs: { x: { datatype: "FP32", shape: [1, 1], data: [1] } },
      outputs: { y: { datatype: "FP32", shape: [1, 1], data: [v.goldenK ?? v.k] } },
    }),
  );
  return folder;
}

export function writeModelSettings(dir: string, name: string, yaml: string): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(join(dir, name, "model.yaml"), yaml);
}

export function removeVersion(dir: string, name: string, version: string): void {
  rmSync(join(dir, name, version), { recursive: true, force: true });
}
