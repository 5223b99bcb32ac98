// The pure pieces under the HTTP layer: nesting, JSON conversion, half floats and decoding.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import { decodeTensor } from "../../src/protocol/decode-tensor.js";
import { fromHalfBits, toHalfBits } from "../../src/protocol/float16.js";
import { toJsonArray } from "../../src/protocol/json-data.js";
import { decodeNative } from "../../src/protocol/native-body.js";
import { nest } from "../../src/tensor.js";

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

  it("nested FP32 and FP64 data of any depth gives what its flat form with a shape gives", () => {
    const image = Array.from({ length: 2 }, (_, n) =>
      Array.from({ length: 3 }, (_, c) =>
        Array.from({ length: 4 }, (_, h) => [0, 1, 2, 3, 4].map((w) => n + c / 3 + h / 7 + w / 11)),
      ),
    );
    const flat = image.flat(3);
    for (const datatype of ["FP32", "FP64"] as const) {
      const s = { name: "img", datatype, shape: [-1, 3, 4, 5] };
      const nested = decodeTensor(s, image);
      assert.deepEqual(nested, decodeTensor(s, flat, [2, 3, 4, 5]));
      assert.ok(nested.data instanceof (datatype === "FP32" ? Float32Array : Float64Array));
    }
    // A ragged level, a string or a bool among the numbers, or a level nested too deep: the
    // same refusals as ever, each naming what is wrong.
    const img = { name: "img", datatype: "FP32" as const, shape: [-1, 3, 4, 5] };
    const ragged = structuredClone(image);
    ragged[1]![2]!.pop();
    const bad = (value: unknown, code: string, message: RegExp) =>
      assert.throws(
        () => decodeTensor(img, value),
        (e: unknown) => e instanceof ModelportError && e.code === code && message.test(e.message),
      );
    bad(ragged, "MP_ERR_INPUT_SHAPE", /element \[1\]\[2\] has 3 items but its siblings have 4/);
    const text = structuredClone(image) as unknown[][][][];
    text[1]![0]![0]![4] = "7";
    bad(text, "MP_ERR_INPUT_DATATYPE", /element 64 is the string "7"/);
    const deeper = structuredClone(image) as unknown[][][][];
    deeper[0]![0]![1]![2] = [1];
    bad(deeper, "MP_ERR_INPUT_SHAPE", /nested deeper than its siblings/);
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
