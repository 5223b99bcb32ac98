// --processes: how long the primary waits before replacing a dead serving process.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { restartDelayMs } from "../../src/cli/cluster.js";

describe("restartDelayMs", () => {
  it("replaces a process that lived long at once, and backs off 1 s doubling to 30 s while they die young", () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 20].map(restartDelayMs),
      [0, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000],
    );
  });
});
