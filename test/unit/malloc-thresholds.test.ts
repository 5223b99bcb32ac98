// Whether a serving process raises glibc's malloc thresholds (src/malloc-thresholds.ts):
// MODELPORT_RAISE_MALLOC_THRESHOLDS 1 (the default) or 0, and nothing else; and what raising them
// does, seen in a fresh process's memory map: a 16 MiB block comes from the heap, where glibc's
// own threshold (128 KiB until a larger mapped block is freed) gives it a mapping of its own.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { raiseMallocThresholds } from "../../src/malloc-thresholds.js";

/** Whether a 16 MiB ArrayBuffer got a mapping of its own in a fresh node process, applying the setting first or not. */
function blockMapped(apply: boolean): boolean {
  const script = `
import { readFileSync } from "node:fs";
import { applyMallocThresholds } from ${JSON.stringify(new URL("../../src/malloc-thresholds.js", import.meta.url).href)};
if (${apply}) applyMallocThresholds();
// Anonymous mappings other than the heap, by address range.
const ranges = () => new Set(readFileSync("/proc/self/maps", "utf8").split("\\n").filter((l) => /^\\S+ \\S+ \\S+ \\S+ 0\\s+$/.test(l)).map((l) => l.split(" ")[0]));
const before = ranges();
const block = new ArrayBuffer(16 * 1024 * 1024);
new Uint8Array(block).fill(1);
const sizes = [...ranges()].filter((r) => !before.has(r)).map((r) => r.split("-").map((h) => Number.parseInt(h, 16))).map(([a, z]) => z - a);
// The block's own mapping is its size and a page of header; helper threads may map a heap of
// glibc's (64 MiB) meanwhile, which is not it.
process.stdout.write(String(sizes.some((n) => n >= block.byteLength && n < block.byteLength + 1024 * 1024)));
`;
  const env = { ...process.env };
  delete env.MODELPORT_RAISE_MALLOC_THRESHOLDS;
  delete env.GLIBC_TUNABLES;
  return (
    execFileSync(process.execPath, ["--input-type=module", "-e", script], { env, encoding: "utf8" }) ===
    "true"
  );
}

describe("raiseMallocThresholds", () => {
  it("raises them without the variable, or with it empty or 1", () => {
    assert.equal(raiseMallocThresholds({}), true);
    assert.equal(raiseMallocThresholds({ MODELPORT_RAISE_MALLOC_THRESHOLDS: "" }), true);
    assert.equal(raiseMallocThresholds({ MODELPORT_RAISE_MALLOC_THRESHOLDS: " 1 " }), true);
  });

  it("leaves glibc's own with 0", () => {
    assert.equal(raiseMallocThresholds({ MODELPORT_RAISE_MALLOC_THRESHOLDS: "0" }), false);
  });

  it("refuses anything else with the variable's name and value", () => {
    for (const bad of ["yes", "true", "2", "-1", "01", "on"]) {
      assert.throws(
        () => raiseMallocThresholds({ MODELPORT_RAISE_MALLOC_THRESHOLDS: bad }),
        { message: `MODELPORT_RAISE_MALLOC_THRESHOLDS must be 1 or 0, got ${JSON.stringify(bad)}` },
        bad,
      );
    }
  });

  it("takes a 16 MiB block from the heap once applied; glibc's own thresholds map it", {
    skip: process.platform !== "linux" && "reads /proc",
  }, () => {
    assert.equal(blockMapped(false), true, "without the setting the block has a mapping of its own");
    assert.equal(blockMapped(true), false, "with the setting the block comes from the heap");
  });

  it("leaves later contexts with a gc function only where node was started with --expose-gc", () => {
    const later = (nodeFlags: string[]) =>
      execFileSync(
        process.execPath,
        [
          ...nodeFlags,
          "--input-type=module",
          "-e",
          `import { runInNewContext } from "node:vm";
import { applyMallocThresholds } from ${JSON.stringify(new URL("../../src/malloc-thresholds.js", import.meta.url).href)};
process.stdout.write(String(applyMallocThresholds()) + " " + runInNewContext("typeof gc"));`,
        ],
        { env: { ...process.env, MODELPORT_RAISE_MALLOC_THRESHOLDS: "1" }, encoding: "utf8" },
      );
    assert.equal(later([]), "true undefined");
    assert.equal(later(["--expose-gc"]), "true function");
  });
});
