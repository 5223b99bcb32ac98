// The client's binary tensors: every datatype to wire bytes and back, checked against bytes
// written independently with Buffer's methods; FP16 as IEEE half; BYTES with length prefixes; a
// binary infer request's layout (JSON header, then each input's bytes) and a binary answer read
// back into typed arrays; data that does not fit its shape or datatype refused before sending.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeBinaryResponse, encodeBinaryRequest } from "../../client/binary-infer.js";
import {
  type Datatype,
  datatypeFor,
  type TensorData,
  tensorFromBytes,
  tensorFromJson,
  tensorToBytes,
} from "../../client/tensors.js";

const CASES: [Datatype, TensorData, Buffer][] = [
  ["FP32", new Float32Array([1.5, -2]), Buffer.from([0, 0, 0xc0, 0x3f, 0, 0, 0, 0xc0])],
  [
    "FP64",
    new Float64Array([0.1]),
    (() => {
      const b = Buffer.alloc(8);
      b.writeDoubleLE(0.1);
      return b;
    })(),
  ],
  [
    "INT64",
    new BigInt64Array([-(2n ** 62n)]),
    (() => {
      const b = Buffer.alloc(8);
      b.writeBigInt64LE(-(2n ** 62n));
      return b;
    })(),
  ],
  ["UINT64", new BigUint64Array([2n ** 64n - 1n]), Buffer.alloc(8, 0xff)],
  ["INT32", new Int32Array([-2]), Buffer.from([0xfe, 0xff, 0xff, 0xff])],
  ["UINT32", new Uint32Array([258]), Buffer.from([2, 1, 0, 0])],
  ["INT16", new Int16Array([-1]), Buffer.from([0xff, 0xff])],
  ["UINT16", new Uint16Array([513]), Buffer.from([1, 2])],
  ["INT8", new Int8Array([-128]), Buffer.from([0x80])],
  ["UINT8", new Uint8Array([255]), Buffer.from([255])],
  ["BOOL", new Uint8Array([1, 0]), Buffer.from([1, 0])],
  ["FP16", new Float32Array([1, -2, 65504]), Buffer.from([0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b])],
  ["BYTES", ["hi", "ü"], Buffer.from([2, 0, 0, 0, 0x68, 0x69, 2, 0, 0, 0, 0xc3, 0xbc])],
];

describe("tensor bytes", () => {
  it("every datatype to the documented wire bytes and back", () => {
    for (const [datatype, data, wire] of CASES) {
      const bytes = tensorToBytes(datatype, data);
      assert.deepEqual(Buffer.from(bytes), wire, datatype);
      const back = tensorFromBytes(datatype, data.length, bytes, datatype);
      assert.deepEqual(back, data, datatype);
    }
  });

  it("reads bytes at any offset (a copy, aligned) and refuses a wrong byte count", () => {
    const buf = new Uint8Array(9);
    buf.set(new Uint8Array(new Float64Array([3.25]).buffer), 1);
    assert.deepEqual(tensorFromBytes("FP64", 1, buf.subarray(1), "x"), new Float64Array([3.25]));
    assert.throws(() => tensorFromBytes("FP32", 2, new Uint8Array(7), "out"), RangeError);
  });

  it("JSON data becomes the datatype's array", () => {
    assert.deepEqual(tensorFromJson("INT64", [[1, 2]]), new BigInt64Array([1n, 2n]));
    assert.deepEqual(tensorFromJson("BOOL", [true, false]), new Uint8Array([1, 0]));
    assert.deepEqual(tensorFromJson("FP32", 2.5), new Float32Array([2.5]));
  });

  it("data that does not fit its shape or datatype is refused before sending", () => {
    assert.equal(datatypeFor("x", { data: new Uint8Array(2), shape: [2], datatype: "BOOL" }), "BOOL");
    assert.throws(() => datatypeFor("x", { data: new Float32Array(3), shape: [2, 2] }), /holds 4 elements/);
    assert.throws(
      () => datatypeFor("x", { data: new Float64Array(1), shape: [1], datatype: "FP32" }),
      /FP32/,
    );
  });
});

describe("binary infer bodies", () => {
  it("a request is the JSON header (its length in Inference-Header-Content-Length) then each input's bytes", () => {
    const req = encodeBinaryRequest(
      {
        a: { data: new Float32Array([1, 2]), shape: [1, 2] },
        ids: { data: new BigInt64Array([5n]), shape: [1] },
      },
      { outputs: ["y"], id: "r1" },
    );
    const n = Number(req.headers["inference-header-content-length"]);
    const body = Buffer.from(req.body);
    const header = JSON.parse(body.subarray(0, n).toString("utf8"));
    assert.deepEqual(header, {
      id: "r1",
      inputs: [
        { name: "a", shape: [1, 2], datatype: "FP32", parameters: { binary_data_size: 8 } },
        { name: "ids", shape: [1], datatype: "INT64", parameters: { binary_data_size: 8 } },
      ],
      outputs: [{ name: "y", parameters: { binary_data: true } }],
    });
    assert.equal(body.length, n + 16);
    assert.equal(body.readFloatLE(n + 4), 2);
    assert.equal(body.readBigInt64LE(n + 8), 5n);
    assert.equal(req.headers["content-type"], "application/octet-stream");
    const all = encodeBinaryRequest({ a: { data: new Float32Array([1]), shape: [1] } });
    const allHeader = JSON.parse(
      Buffer.from(all.body).subarray(0, Number(all.headers["inference-header-content-length"])).toString(),
    );
    assert.deepEqual(allHeader.parameters, { binary_data_output: true });
  });

  it("an answer mixing binary and JSON outputs is read into typed arrays", () => {
    const y = Buffer.alloc(8);
    y.writeFloatLE(0.5, 0);
    y.writeFloatLE(-1, 4);
    const header = Buffer.from(
      JSON.stringify({
        model_name: "m",
        outputs: [
          { name: "y", datatype: "FP32", shape: [1, 2], parameters: { binary_data_size: 8 } },
          { name: "label", datatype: "INT64", shape: [1], data: [3] },
        ],
      }),
    );
    const { meta, outputs } = decodeBinaryResponse(Buffer.concat([header, y]), String(header.length));
    assert.equal(meta.model_name, "m");
    assert.deepEqual(outputs.y, { datatype: "FP32", shape: [1, 2], data: new Float32Array([0.5, -1]) });
    assert.deepEqual(outputs.label, { datatype: "INT64", shape: [1], data: new BigInt64Array([3n]) });
    assert.throws(
      () => decodeBinaryResponse(Buffer.concat([header, y, Buffer.alloc(1)]), String(header.length)),
      /follow/,
    );
  });
});
