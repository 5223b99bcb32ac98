// The binary tensor codecs (src/protocol/) without a server: bytes ↔ typed arrays for every datatype, the OIP binary body split
// and build, output selection, the native route's raw tensor and Accept negotiation.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ModelportError } from "../../src/errors.js";
import {
  binaryOutputs,
  buildBinaryBody,
  encodeOipBinary,
  parseHeaderLength,
  splitOipBody,
} from "../../src/protocol/binary-body.js";
import { BinarySection } from "../../src/protocol/binary-section.js";
import { decodeOip, jsonOutputs } from "../../src/protocol/oip-body.js";
import {
  decodeRawTensor,
  encodeRawTensor,
  parseShapeHeader,
  rawOutputName,
  wantsOctetStream,
} from "../../src/protocol/raw-tensor.js";
import { tensorDataFromBytes, tensorToBytes } from "../../src/protocol/tensor-bytes.js";
import type { Datatype, ModelSignature, Tensor, TensorData } from "../../src/tensor.js";

const LIMITS = { maxBatchRows: 100 };
/** limits.maxJsonDepth as the schema's default sets it. */
const DEPTH = 128;

function throwsCode(fn: () => unknown, code: string, message?: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ModelportError, String(err));
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message, message);
    return true;
  });
}

/** Little-endian bytes written with Buffer's own methods, to check the codecs against. */
function le(
  kind: "f16" | "f32" | "f64" | "i64" | "u64" | "i32" | "u32" | "i16" | "u16",
  values: number[],
): Buffer {
  const size = { f16: 2, f32: 4, f64: 8, i64: 8, u64: 8, i32: 4, u32: 4, i16: 2, u16: 2 }[kind];
  const buf = Buffer.alloc(values.length * size);
  values.forEach((v, i) => {
    const at = i * size;
    if (kind === "f16") buf.writeUInt16LE(v, at);
    else if (kind === "f32") buf.writeFloatLE(v, at);
    else if (kind === "f64") buf.writeDoubleLE(v, at);
    else if (kind === "i64") buf.writeBigInt64LE(BigInt(v), at);
    else if (kind === "u64") buf.writeBigUInt64LE(BigInt(v), at);
    else if (kind === "i32") buf.writeInt32LE(v, at);
    else if (kind === "u32") buf.writeUInt32LE(v, at);
    else if (kind === "i16") buf.writeInt16LE(v, at);
    else buf.writeUInt16LE(v, at);
  });
  return buf;
}

describe("tensor bytes", () => {
  const cases: [Datatype, Buffer, unknown[]][] = [
    ["BOOL", Buffer.from([1, 0, 1]), [1, 0, 1]],
    ["UINT8", Buffer.from([0, 7, 255]), [0, 7, 255]],
    ["INT8", Buffer.from([0x80, 0xff, 5]), [-128, -1, 5]],
    ["UINT16", le("u16", [0, 65535]), [0, 65535]],
    ["INT16", le("i16", [-32768, 12]), [-32768, 12]],
    ["UINT32", le("u32", [4294967295, 1]), [4294967295, 1]],
    ["INT32", le("i32", [-2147483648, 3]), [-2147483648, 3]],
    ["UINT64", le("u64", [0, 2 ** 53 + 2]), [0n, 2n ** 53n + 2n]],
    ["INT64", le("i64", [-(2 ** 40), 9]), [-(2n ** 40n), 9n]],
    ["FP16", le("f16", [0x3c00, 0xc000, 0x3555]), [1, -2, 0.333251953125]],
    ["FP32", le("f32", [1.5, -0.25, 1e30]), [1.5, -0.25, Math.fround(1e30)]],
    ["FP64", le("f64", [0.1, -1e-300, Number.NaN]), [0.1, -1e-300, Number.NaN]],
  ];

  for (const [datatype, bytes, values] of cases) {
    it(`${datatype}: bytes → data → bytes`, () => {
      const data = tensorDataFromBytes(datatype, values.length, bytes, "t") as Exclude<TensorData, string[]>;
      assert.deepEqual(Array.from(data as ArrayLike<unknown>), values);
      const back = tensorToBytes({ datatype, shape: [values.length], data });
      assert.deepEqual(Buffer.from(back), bytes);
    });
  }

  it("representations follow tensor.ts: FP16 as Float32Array, 64-bit ints as BigInt arrays, own aligned buffers", () => {
    assert.ok(tensorDataFromBytes("FP16", 1, le("f16", [0x3c00]), "t") instanceof Float32Array);
    assert.ok(tensorDataFromBytes("INT64", 1, le("i64", [1]), "t") instanceof BigInt64Array);
    // Bytes at an odd offset inside a larger buffer (as in a request body) are copied out aligned.
    const body = Buffer.concat([Buffer.from([9]), le("f64", [2.5, 3.5])]);
    const data = tensorDataFromBytes("FP64", 2, body.subarray(1), "t") as Float64Array;
    assert.deepEqual(Array.from(data), [2.5, 3.5]);
    assert.equal(data.byteOffset, 0);
    assert.equal(data.buffer.byteLength, 16);
  });

  it("BYTES: 4-byte little-endian lengths, UTF-8 contents", () => {
    const bytes = Buffer.concat([
      le("u32", [2]),
      Buffer.from("hé"),
      le("u32", [0]),
      le("u32", [1]),
      Buffer.from("x"),
    ]);
    assert.equal(Buffer.from("hé").length, 3);
    throwsCode(() => tensorDataFromBytes("BYTES", 3, bytes, "t"), "MP_ERR_BINARY_DATA_SIZE");
    const fixed = Buffer.concat([
      le("u32", [3]),
      Buffer.from("hé"),
      le("u32", [0]),
      le("u32", [1]),
      Buffer.from("x"),
    ]);
    const data = tensorDataFromBytes("BYTES", 3, fixed, "t");
    assert.deepEqual(data, ["hé", "", "x"]);
    assert.deepEqual(Buffer.from(tensorToBytes({ datatype: "BYTES", shape: [3], data })), fixed);
    throwsCode(
      () => tensorDataFromBytes("BYTES", 4, fixed, "t"),
      "MP_ERR_BINARY_DATA_SIZE",
      /end before element 3/,
    );
    throwsCode(
      () => tensorDataFromBytes("BYTES", 2, fixed, "t"),
      "MP_ERR_BINARY_DATA_SIZE",
      /its 2 BYTES elements use 11/,
    );
    // A shape may claim more elements than an array can hold: refused before any is made.
    for (const count of [5, 1e15, 2 ** 53 - 1]) {
      throwsCode(
        () => tensorDataFromBytes("BYTES", count, fixed, "t"),
        "MP_ERR_BINARY_DATA_SIZE",
        new RegExp(`16 bytes cannot hold ${count} BYTES elements`),
      );
    }
  });

  it("refuses a byte count that is not elements × element size, and BOOL bytes other than 0/1", () => {
    throwsCode(
      () => tensorDataFromBytes("FP32", 3, Buffer.alloc(8), "input 'x'"),
      "MP_ERR_BINARY_DATA_SIZE",
      /input 'x': 8 bytes, but 3 FP32 elements need 12 \(4 bytes each\)/,
    );
    throwsCode(
      () => tensorDataFromBytes("BOOL", 2, Buffer.from([1, 2]), "t"),
      "MP_ERR_INPUT_DATATYPE",
      /byte 2/,
    );
  });
});

const TREE: ModelSignature = {
  inputs: [{ name: "features", datatype: "FP32", shape: [-1, 3] }],
  outputs: [
    { name: "label", datatype: "INT64", shape: [-1] },
    { name: "proba", datatype: "FP32", shape: [-1, 2] },
  ],
  batchable: true,
};

const TWO: ModelSignature = {
  inputs: [
    { name: "x", datatype: "FP32", shape: [-1, 2] },
    { name: "flag", datatype: "BOOL", shape: [-1] },
  ],
  outputs: [{ name: "y", datatype: "FP32", shape: [-1] }],
  batchable: true,
};

/** Builds a binary OIP request the way a client does. */
function request(header: unknown, ...chunks: Buffer[]): { body: Buffer; length: string } {
  const built = buildBinaryBody(Buffer.from(JSON.stringify(header)), chunks);
  return { body: built.body, length: built.headers["inference-header-content-length"]! };
}

describe("OIP binary bodies", () => {
  it("buildBinaryBody: the JSON header, then the chunks, with its length and content type", () => {
    const built = buildBinaryBody(Buffer.from('{"a":1}'), [Buffer.from([1, 2]), Buffer.from([3])]);
    assert.equal(built.headers["content-type"], "application/octet-stream");
    assert.equal(built.headers["inference-header-content-length"], "7");
    assert.deepEqual(built.body, Buffer.concat([Buffer.from('{"a":1}'), Buffer.from([1, 2, 3])]));
  });

  it("splitOipBody passes JSON through and splits a Buffer at the header length", () => {
    const json = { inputs: [] };
    assert.deepEqual(splitOipBody(json, undefined, DEPTH), { body: json });
    const req = request({ inputs: [1] }, Buffer.from([5, 6]));
    const split = splitOipBody(req.body, req.length, DEPTH);
    assert.deepEqual(split.body, { inputs: [1] });
    assert.ok(split.binary instanceof BinarySection);
  });

  it("parseHeaderLength: a whole number from 1 to the body length", () => {
    assert.equal(parseHeaderLength("12", 20), 12);
    assert.equal(parseHeaderLength(" 20 ", 20), 20);
    for (const bad of ["", "abc", "-1", "1.5", "1e3", "0x10"]) {
      throwsCode(() => parseHeaderLength(bad, 20), "MP_ERR_BINARY_HEADER_LENGTH", /whole number/);
    }
    throwsCode(() => parseHeaderLength(["4", "4"], 20), "MP_ERR_BINARY_HEADER_LENGTH");
    throwsCode(() => parseHeaderLength("0", 20), "MP_ERR_BINARY_HEADER_LENGTH", /not supported/);
    throwsCode(() => parseHeaderLength("21", 20), "MP_ERR_BINARY_HEADER_LENGTH", /beyond the 20-byte body/);
  });

  it("malformed or poisoned JSON headers; a missing header when the body is not all JSON", () => {
    const body = Buffer.from('{"inputs": [}\u0001\u0002');
    throwsCode(() => splitOipBody(body, "13", DEPTH), "MP_ERR_REQUEST_MALFORMED_JSON", /first 13 bytes/);
    throwsCode(() => splitOipBody(body, undefined, DEPTH), "MP_ERR_BINARY_HEADER_LENGTH", /missing/);
    const poisoned = Buffer.from('{"inputs": [], "\\u005f_proto__": {"x": 1}}');
    throwsCode(
      () => splitOipBody(poisoned, String(poisoned.length), DEPTH),
      "MP_ERR_REQUEST_MALFORMED_JSON",
      /prototype/,
    );
    // Without the header, a body that is all JSON is a JSON request (Triton's rule).
    assert.deepEqual(splitOipBody(Buffer.from('{"inputs": []}'), undefined, DEPTH).body, { inputs: [] });
  });

  it("decodeOip with binary inputs, mixed with JSON data, in input order", () => {
    const req = request(
      {
        inputs: [
          { name: "x", shape: [2, 2], datatype: "FP32", parameters: { binary_data_size: 16 } },
          { name: "flag", shape: [2], datatype: "BOOL", data: [true, false] },
        ],
      },
      le("f32", [1, 2, 3, 4]),
    );
    const { body, binary } = splitOipBody(req.body, req.length, DEPTH);
    const tensors = decodeOip(body, TWO, LIMITS, binary);
    assert.deepEqual(Array.from(tensors.x!.data as Float32Array), [1, 2, 3, 4]);
    assert.deepEqual(tensors.x!.shape, [2, 2]);
    assert.deepEqual(Array.from(tensors.flag!.data as Uint8Array), [1, 0]);

    const both = request(
      {
        inputs: [
          { name: "flag", shape: [2], datatype: "BOOL", parameters: { binary_data_size: 2 } },
          { name: "x", shape: [2, 2], datatype: "FP32", parameters: { binary_data_size: 16 } },
        ],
      },
      Buffer.from([0, 1]),
      le("f32", [5, 6, 7, 8]),
    );
    const split = splitOipBody(both.body, both.length, DEPTH);
    const t = decodeOip(split.body, TWO, LIMITS, split.binary);
    assert.deepEqual(Array.from(t.x!.data as Float32Array), [5, 6, 7, 8]);
    assert.deepEqual(Array.from(t.flag!.data as Uint8Array), [0, 1]);
  });

  it("decodeOip refuses sizes that do not fit, bytes past the end, trailing bytes and a missing binary part", () => {
    const input = (size: unknown) => ({
      name: "features",
      shape: [1, 3],
      datatype: "FP32",
      parameters: { binary_data_size: size },
    });
    const decode = (header: unknown, ...chunks: Buffer[]) => {
      const req = request(header, ...chunks);
      const { body, binary } = splitOipBody(req.body, req.length, DEPTH);
      return decodeOip(body, TREE, LIMITS, binary);
    };
    throwsCode(() => decode({ inputs: [input(8)] }, Buffer.alloc(8)), "MP_ERR_BINARY_DATA_SIZE", /need 12/);
    throwsCode(
      () => decode({ inputs: [input(12)] }, Buffer.alloc(8)),
      "MP_ERR_BINARY_DATA_SIZE",
      /only 8 bytes/,
    );
    throwsCode(() => decode({ inputs: [input("12")] }, Buffer.alloc(12)), "MP_ERR_BINARY_DATA_SIZE");
    throwsCode(
      () => decode({ inputs: [input(12)] }, Buffer.alloc(14)),
      "MP_ERR_BINARY_TRAILING_BYTES",
      /2 bytes follow/,
    );
    throwsCode(
      () => decodeOip({ inputs: [input(12)] }, TREE, LIMITS),
      "MP_ERR_BINARY_HEADER_LENGTH",
      /no binary part/,
    );
    const whole = Buffer.from(JSON.stringify({ inputs: [input(12)] }));
    const split = splitOipBody(whole, undefined, DEPTH);
    throwsCode(
      () => decodeOip(split.body, TREE, LIMITS, split.binary),
      "MP_ERR_BINARY_HEADER_LENGTH",
      /no Inference-Header-Content-Length/,
    );
    // Shape and datatype get the JSON path's checks.
    throwsCode(
      () => decode({ inputs: [{ ...input(12), shape: [1, 2] }] }, Buffer.alloc(12)),
      "MP_ERR_INPUT_SHAPE",
      /\[1, 2\].*\[-1, 3\]/,
    );
    throwsCode(
      () => decode({ inputs: [{ ...input(24), datatype: "FP64" }] }, Buffer.alloc(24)),
      "MP_ERR_INPUT_DATATYPE",
    );
  });

  it("binaryOutputs: per-output binary_data overrides the request's binary_data_output", () => {
    assert.equal(binaryOutputs({ inputs: [] }, TREE), undefined);
    assert.deepEqual(
      binaryOutputs({ parameters: { binary_data_output: true } }, TREE),
      new Set(["label", "proba"]),
    );
    assert.deepEqual(
      binaryOutputs(
        {
          parameters: { binary_data_output: true },
          outputs: [{ name: "label", parameters: { binary_data: false } }, { name: "proba" }],
        },
        TREE,
      ),
      new Set(["proba"]),
    );
    assert.deepEqual(
      binaryOutputs(
        { outputs: [{ name: "label", parameters: { binary_data: true } }, { name: "proba" }] },
        TREE,
      ),
      new Set(["label"]),
    );
    throwsCode(
      () => binaryOutputs({ outputs: [{ name: "label", parameters: { binary_data: 1 } }] }, TREE),
      "MP_ERR_REQUEST_INVALID",
    );
    throwsCode(() => binaryOutputs({ parameters: [] }, TREE), "MP_ERR_REQUEST_INVALID");
  });

  it("encodeOipBinary: binary outputs as binary_data_size plus bytes in output order, others as JSON data", () => {
    const outputs: Record<string, Tensor> = {
      label: { datatype: "INT64", shape: [2], data: new BigInt64Array([1n, 0n]) },
      proba: { datatype: "FP32", shape: [2, 2], data: new Float32Array([0.25, 0.75, 1, 0]) },
    };
    const res = encodeOipBinary({ model_name: "m" }, jsonOutputs(outputs), new Set(["proba"]));
    const len = Number(res.headers["inference-header-content-length"]);
    const header = JSON.parse(res.body.subarray(0, len).toString());
    assert.deepEqual(header, {
      model_name: "m",
      outputs: [
        { name: "label", datatype: "INT64", shape: [2], data: [1, 0] },
        { name: "proba", datatype: "FP32", shape: [2, 2], parameters: { binary_data_size: 16 } },
      ],
    });
    assert.deepEqual(res.body.subarray(len), le("f32", [0.25, 0.75, 1, 0]));
    const only = encodeOipBinary({}, jsonOutputs(outputs, ["label"]), new Set(["label"]));
    assert.equal(only.body.length, Number(only.headers["inference-header-content-length"]) + 16);
  });
});

describe("native raw tensors", () => {
  it("X-Tensor-Shape, or dim 0 inferred from the byte length and the fixed trailing dims", () => {
    const bytes = le("f32", [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(
      decodeRawTensor(bytes, { "x-tensor-shape": "2,3" }, TREE, LIMITS).features!.shape,
      [2, 3],
    );
    assert.deepEqual(
      decodeRawTensor(bytes, { "x-tensor-shape": " 2 , 3 " }, TREE, LIMITS).features!.shape,
      [2, 3],
    );
    const inferred = decodeRawTensor(bytes, {}, TREE, LIMITS).features!;
    assert.deepEqual(inferred.shape, [2, 3]);
    assert.deepEqual(Array.from(inferred.data as Float32Array), [1, 2, 3, 4, 5, 6]);
    throwsCode(() => decodeRawTensor(bytes.subarray(0, 20), {}, TREE, LIMITS), "MP_ERR_BINARY_DATA_SIZE");
    throwsCode(
      () => decodeRawTensor(bytes, { "x-tensor-shape": "3,3" }, TREE, LIMITS),
      "MP_ERR_BINARY_DATA_SIZE",
      /need 36/,
    );
    throwsCode(() => decodeRawTensor(bytes, { "x-tensor-shape": "1,6" }, TREE, LIMITS), "MP_ERR_INPUT_SHAPE");
    throwsCode(() => decodeRawTensor(Buffer.alloc(0), {}, TREE, LIMITS), "MP_ERR_INPUT_EMPTY_BATCH");
    throwsCode(() => decodeRawTensor(bytes, {}, TWO, LIMITS), "MP_ERR_REQUEST_INVALID", /2 inputs/);
    assert.ok(decodeRawTensor(bytes, { "x-tensor-datatype": "FP32" }, TREE, LIMITS).features);
    throwsCode(
      () => decodeRawTensor(bytes, { "x-tensor-datatype": "FP64" }, TREE, LIMITS),
      "MP_ERR_INPUT_DATATYPE",
      /sent as FP64; the model expects FP32/,
    );
  });

  it("shapes it cannot infer, and shape headers it cannot read", () => {
    const dynamic: ModelSignature = {
      ...TREE,
      inputs: [{ name: "img", datatype: "FP32", shape: [-1, -1, 3] }],
    };
    throwsCode(
      () => decodeRawTensor(Buffer.alloc(24), {}, dynamic, LIMITS),
      "MP_ERR_INPUT_SHAPE",
      /X-Tensor-Shape/,
    );
    const fixed: ModelSignature = { ...TREE, inputs: [{ name: "v", datatype: "FP64", shape: [2] }] };
    assert.deepEqual(decodeRawTensor(le("f64", [1, 2]), {}, fixed, LIMITS).v!.shape, [2]);
    const scalar: ModelSignature = { ...TREE, inputs: [{ name: "s", datatype: "FP32", shape: [] }] };
    assert.deepEqual(decodeRawTensor(le("f32", [7]), {}, scalar, LIMITS).s!.shape, []);
    assert.deepEqual(parseShapeHeader(""), []);
    throwsCode(() => parseShapeHeader("1,,2"), "MP_ERR_INPUT_SHAPE");
    throwsCode(() => parseShapeHeader("1,-2"), "MP_ERR_INPUT_SHAPE");
  });

  it("encodeRawTensor and the one output a raw answer can carry", () => {
    const res = encodeRawTensor("proba", {
      datatype: "FP32",
      shape: [1, 2],
      data: new Float32Array([0.5, 0.5]),
    });
    assert.deepEqual(res.headers, {
      "content-type": "application/octet-stream",
      "x-tensor-name": "proba",
      "x-tensor-shape": "1,2",
      "x-tensor-datatype": "FP32",
    });
    assert.deepEqual(res.body, le("f32", [0.5, 0.5]));
    assert.equal(rawOutputName(["proba"], TREE), "proba");
    assert.equal(rawOutputName(undefined, TWO), "y");
    throwsCode(() => rawOutputName(undefined, TREE), "MP_ERR_RESPONSE_NOT_ACCEPTABLE", /2 outputs/);
  });

  it("wantsOctetStream: only when Accept prefers it over JSON", () => {
    assert.equal(wantsOctetStream(undefined), false);
    assert.equal(wantsOctetStream("*/*"), false);
    assert.equal(wantsOctetStream("application/octet-stream"), true);
    assert.equal(wantsOctetStream("Application/Octet-Stream"), true);
    assert.equal(wantsOctetStream("application/octet-stream;q=0"), false);
    assert.equal(wantsOctetStream("application/json, application/octet-stream"), false);
    assert.equal(wantsOctetStream("application/octet-stream, application/json"), true);
    assert.equal(wantsOctetStream("application/json;q=0.5, application/octet-stream"), true);
    assert.equal(wantsOctetStream("application/json, application/octet-stream;q=0.9"), false);
  });
});
