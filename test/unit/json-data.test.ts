// Tensors' data as JSON bytes (src/protocol/json-data.ts): flat and nested by shape, every
// datatype, and the same JSON values as the JS arrays they replace.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { JsonWriter, toJsonArray } from "../../src/protocol/json-data.js";
import { nest, type Tensor } from "../../src/tensor.js";

/** The writer's text as bytes, checked to be the text it makes as a string (toText) too. */
const whole = (w: () => JsonWriter) => {
  const bytes = w().finish().toString();
  assert.equal(w().toText(), bytes, "toText() and finish() agree");
  return bytes;
};
const flat = (t: Tensor) => whole(() => new JsonWriter().data(t, false));
const nested = (t: Tensor) => whole(() => new JsonWriter().data(t, true));

describe("tensor data as JSON bytes", () => {
  it("FP32 flat and nested by shape, in the shortest text that reads back", () => {
    const t: Tensor = {
      datatype: "FP32",
      shape: [2, 3],
      data: Float32Array.of(0.1, -2, 1 / 3, 1e-7, 5e21, 0),
    };
    assert.equal(flat(t), "[0.1,-2,0.33333334,1e-7,5e+21,0]");
    assert.equal(nested(t), "[[0.1,-2,0.33333334],[1e-7,5e+21,0]]");
    assert.deepEqual(Float32Array.from(JSON.parse(flat(t)) as number[]), t.data);
  });

  it("a scalar is its value nested and a one-element array flat; empty dimensions stay arrays", () => {
    const scalar: Tensor = { datatype: "FP32", shape: [], data: Float32Array.of(2.5) };
    assert.equal(nested(scalar), "2.5");
    assert.equal(flat(scalar), "[2.5]");
    assert.equal(nested({ datatype: "FP32", shape: [2, 0], data: new Float32Array(0) }), "[[],[]]");
    assert.equal(nested({ datatype: "INT32", shape: [0, 3], data: new Int32Array(0) }), "[]");
    assert.equal(flat({ datatype: "INT32", shape: [2, 0], data: new Int32Array(0) }), "[]");
    const deep: Tensor = { datatype: "INT8", shape: [2, 1, 2], data: Int8Array.of(1, 2, 3, 4) };
    assert.equal(nested(deep), "[[[1,2]],[[3,4]]]");
  });

  it("integers up to 32 bits and BOOL as JSON.stringify writes them", () => {
    const cases: Tensor[] = [
      { datatype: "INT8", shape: [3], data: Int8Array.of(-128, 0, 127) },
      { datatype: "UINT8", shape: [2], data: Uint8Array.of(0, 255) },
      { datatype: "INT16", shape: [2], data: Int16Array.of(-32768, 32767) },
      { datatype: "UINT16", shape: [1], data: Uint16Array.of(65535) },
      { datatype: "INT32", shape: [4], data: Int32Array.of(-2147483648, 2147483647, -7, 10) },
      { datatype: "UINT32", shape: [2], data: Uint32Array.of(4294967295, 1000000000) },
      { datatype: "BOOL", shape: [3], data: Uint8Array.of(1, 0, 1) },
    ];
    for (const t of cases) {
      assert.equal(flat(t), JSON.stringify(toJsonArray(t)), t.datatype);
      assert.equal(nested(t), JSON.stringify(nest(toJsonArray(t), t.shape)), t.datatype);
    }
  });

  it("FP64, 64-bit integers and BYTES through JSON.stringify, unchanged", () => {
    const cases: Tensor[] = [
      { datatype: "FP64", shape: [1, 2], data: Float64Array.of(0.1, Math.PI) },
      { datatype: "INT64", shape: [2], data: BigInt64Array.of(-5n, 123456789013n) },
      { datatype: "UINT64", shape: [1], data: BigUint64Array.of(7n) },
      { datatype: "BYTES", shape: [2], data: ['é"x', "\u0000"] },
    ];
    for (const t of cases) {
      assert.equal(flat(t), JSON.stringify(toJsonArray(t)), t.datatype);
      assert.equal(nested(t), JSON.stringify(nest(toJsonArray(t), t.shape)), t.datatype);
    }
  });

  it("assembles text and data into one JSON body, multi-byte text included", () => {
    const t: Tensor = { datatype: "FP32", shape: [2], data: Float32Array.of(1.5, -0.25) };
    const body = new JsonWriter().text('{"name":"é","data":').data(t, false).text("}").finish();
    assert.deepEqual(JSON.parse(body.toString()), { name: "é", data: [1.5, -0.25] });
    const opened = (fields: Record<string, unknown>) =>
      JSON.parse(new JsonWriter().open(fields, "outputs").data(t, false).text("}").finish().toString());
    assert.deepEqual(opened({}), { outputs: [1.5, -0.25] });
    assert.deepEqual(opened({ id: "x", version: undefined }), { id: "x", outputs: [1.5, -0.25] });
  });

  it("a shape that does not match the data is left to nest(), as before", () => {
    const t: Tensor = { datatype: "FP32", shape: [2, 1], data: Float32Array.of(1, 2, 3) };
    assert.equal(nested(t), JSON.stringify(nest(toJsonArray(t), t.shape)));
  });

  it("as a string, the same text as the bytes for every FP32 value form", () => {
    // Subnormals, the largest and smallest normals, exponent forms, -0, NaN and infinities.
    const special = Float32Array.of(
      1.4e-45,
      1e-40,
      1.1754944e-38,
      3.4028235e38,
      1e21,
      1e-7,
      123456.79,
      -0,
      NaN,
      Infinity,
      -Infinity,
    );
    const bits = new Uint32Array(4096).map((_, i) => (Math.imul(i + 1, 2654435761) ^ (i << 7)) >>> 0);
    for (const data of [special, new Float32Array(bits.buffer)]) {
      const t: Tensor = { datatype: "FP32", shape: [data.length], data };
      const text = new JsonWriter().open({ model: "é" }, "outputs").data(t, true).text("}").toText();
      assert.equal(
        text,
        new JsonWriter().open({ model: "é" }, "outputs").data(t, true).text("}").finish().toString(),
      );
    }
  });

  it("written chunk by chunk, the text is the same at every chunk size", () => {
    const values = Float32Array.from({ length: 6000 }, (_, i) => Math.sin(i) * 10 ** ((i % 13) - 6));
    const tensors: Tensor[] = [
      { datatype: "FP32", shape: [5, 4, 300], data: values },
      { datatype: "FP32", shape: [], data: Float32Array.of(-0.5) },
      { datatype: "INT16", shape: [3, 1, 2], data: Int16Array.of(-32768, 1, 2, 3, 4, 32767) },
      { datatype: "BOOL", shape: [2, 2], data: Uint8Array.of(1, 0, 0, 1) },
      { datatype: "FP32", shape: [2, 0, 3], data: new Float32Array(0) },
      { datatype: "INT64", shape: [2], data: BigInt64Array.of(-1n, 2n) },
    ];
    const writer = (nested: boolean) => {
      const w = new JsonWriter().open({ id: "é" }, "outputs").text("[");
      for (const [i, t] of tensors.entries()) w.text(i ? "," : "").data(t, nested);
      return w.text("]}");
    };
    for (const nested of [false, true]) {
      const whole = writer(nested).finish();
      assert.equal(writer(nested).toText(), whole.toString(), `nested ${nested}, as a string`);
      assert.ok(whole.length <= writer(nested).bound);
      JSON.parse(whole.toString());
      for (const size of [1, 7, 23, 64, 100, 1000, 4096, 65536]) {
        const w = writer(nested);
        const pieces: Buffer[] = [];
        for (let piece = w.next(size); piece; piece = w.next(size)) pieces.push(piece);
        assert.ok(pieces.every((p) => p.length > 0));
        assert.equal(
          Buffer.concat(pieces).toString(),
          whole.toString(),
          `nested ${nested}, chunks of ${size}`,
        );
        if (size >= 4096) assert.ok(pieces.length > 1 && pieces.slice(0, -1).every((p) => p.length <= size));
      }
    }
  });
});
