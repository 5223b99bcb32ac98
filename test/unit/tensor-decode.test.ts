// The pure pieces under the HTTP layer: nesting, JSON conversion, half floats and decoding.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import { decodeTensor } from "../../src/protocol/decode-tensor.js";
import { fromHalfBits, toHalfBits } from "../../src/protocol/float16.js";
import { decodeNative } from "../../src/protocol/native-body.js";
import { nest, toJsonArray } from "../../src/tensor.js";

describe("tensor helpers", () => {
  it("nest builds row-major nested arrays and returns scalars bare", () => {
    assert.deepEqual(nest([1, 2, 3, 4, 5, 6], [2, 3]), [
      [1, 2, 3],
      [4, 5, 6],
    ]);
    assert.deepEqual(nest([1, 2, 3, 4], [2, 1, 2]), [[[1, 2]], [[3, 4]]]);
    assert.equal(nest([7], []), 7);
    assert.deepEqual(nest([], [0, 3]), []);
  });

  it("toJsonArray: INT64 to numbers, BOOL to booleans", () => {
    assert.deepEqual(
      toJsonArray({ datatype: "INT64", shape: [2], data: new BigInt64Array([5n, -2n]) }),
      [5, -2],
    );
    assert.deepEqual(toJsonArray({ datatype: "BOOL", shape: [2], data: new Uint8Array([1, 0]) }), [
      true,
      false,
    ]);
  });

  it("half floats round-trip exactly representable values and round to nearest", () => {
    const values = new Float32Array([0, 1, -2, 0.5, 65504, 2 ** -14, 2 ** -24, Number.POSITIVE_INFINITY]);
    assert.deepEqual(Array.from(fromHalfBits(toHalfBits(values))), Array.from(values));
    assert.equal(toHalfBits(new Float32Array([1]))[0], 0x3c00);
    assert.equal(fromHalfBits(toHalfBits(new Float32Array([0.1])))[0], 0.0999755859375);
    assert.ok(Number.isNaN(fromHalfBits(toHalfBits(new Float32Array([Number.NaN])))[0]));
    assert.equal(fromHalfBits(toHalfBits(new Float32Array([1e6])))[0], Number.POSITIVE_INFINITY);
  });
});

describe("decode", () => {
  const spec = { name: "x", datatype: "FP32" as const, shape: [-1, 2] };

  it("nested and flat+shape give the same tensor", () => {
    const a = decodeTensor(spec, [
      [1, 2],
      [3, 4],
    ]);
    const b = decodeTensor(spec, [1, 2, 3, 4], [2, 2]);
    assert.deepEqual(a, b);
    assert.ok(a.data instanceof Float32Array);
  });

  it("integers become the right typed arrays", () => {
    const t = decodeTensor({ name: "i", datatype: "INT64", shape: [-1] }, [1, -2]);
    assert.deepEqual(t.data, new BigInt64Array([1n, -2n]));
    const u = decodeTensor({ name: "u", datatype: "UINT8", shape: [-1] }, [0, 255]);
    assert.deepEqual(u.data, new Uint8Array([0, 255]));
  });

  it("a scalar input takes a bare number", () => {
    const t = decodeTensor({ name: "s", datatype: "FP64", shape: [] }, 2.5);
    assert.deepEqual(t.shape, []);
    assert.deepEqual(Array.from(t.data as Float64Array), [2.5]);
  });

  it("errors carry the table code and name the input", () => {
    assert.throws(
      () => decodeTensor(spec, [[1, Number.POSITIVE_INFINITY]]),
      (e: unknown) =>
        e instanceof ModelportError && e.code === "MP_ERR_INPUT_NOT_FINITE" && /'x'/.test(e.message),
    );
    assert.throws(
      () =>
        decodeNative(
          { rows: [[1, 2]], inputs: {} },
          { inputs: [spec], outputs: [], batchable: true },
          { maxBatchRows: 4 },
        ),
      (e: unknown) => e instanceof ModelportError && e.code === "MP_ERR_REQUEST_INVALID",
    );
  });
});
