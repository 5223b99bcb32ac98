// Which heap growing factor a serving process sets (src/heap-growth.ts): node's own flag wins,
// then MODELPORT_HEAP_GROWING_PERCENT, then modelport's default.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HEAP_GROWING_PERCENT, heapGrowingPercent } from "../../src/heap-growth.js";

describe("heapGrowingPercent", () => {
  it("is modelport's default without node's flag or the variable", () => {
    assert.equal(heapGrowingPercent([], {}), HEAP_GROWING_PERCENT);
    assert.equal(
      heapGrowingPercent(["--max-old-space-size=4096"], { MODELPORT_HEAP_GROWING_PERCENT: "" }),
      400,
    );
  });

  it("leaves node's own --heap-growing-percent standing, in either spelling", () => {
    for (const flag of ["--heap-growing-percent=150", "--heap_growing_percent=0", "--heap-growing-percent"])
      assert.equal(heapGrowingPercent([flag], { MODELPORT_HEAP_GROWING_PERCENT: "200" }), undefined, flag);
    assert.equal(heapGrowingPercent(["--heap-growing-percentage=5"], {}), 400);
  });

  it("takes the variable's whole number, 0 (V8's own choice) included", () => {
    assert.equal(heapGrowingPercent([], { MODELPORT_HEAP_GROWING_PERCENT: "0" }), 0);
    assert.equal(heapGrowingPercent([], { MODELPORT_HEAP_GROWING_PERCENT: " 150 " }), 150);
    assert.equal(heapGrowingPercent([], { MODELPORT_HEAP_GROWING_PERCENT: "10000" }), 10_000);
  });

  it("refuses anything else with the variable's name and value", () => {
    for (const bad of ["x", "-5", "1e3", "10001", "2.5", "0x10"]) {
      assert.throws(
        () => heapGrowingPercent([], { MODELPORT_HEAP_GROWING_PERCENT: bad }),
        {
          message: `MODELPORT_HEAP_GROWING_PERCENT must be a whole number from 0 to 10000, got ${JSON.stringify(bad)}`,
        },
        bad,
      );
    }
  });
});
