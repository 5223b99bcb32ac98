// Binary tensors through a real listening server: the Open Inference Protocol's binary tensor data
// extension (Inference-Header-Content-Length, binary_data_size, binary_data / binary_data_output)
// and the native route's raw application/octet-stream tensor. Binary must answer exactly what JSON
// answers, in every direction, and every malformed binary body gets a 4xx with its MP_ERR code.
// The tensor bytes here are written and read with Buffer's own methods, independently of src/protocol/.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { asFp32 } from "../helpers/fp32.js";
import { mixedHandler } from "../helpers/mixed-handler.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;

before(async () => {
  const models = await testModels();
  writeFileSync(join(models, "binary-mixed.mjs"), mixedHandler(40, 20));
  const file = join(models, "binary.yaml");
  writeFileSync(
    file,
    [
      "limits:",
      "  maxBodyBytes: 2000000",
      "  maxBatchRows: 4096",
      "models:",
      "  - name: tree",
      `    path: ${join(models, "churn-tree.onnx")}`,
      "  - name: multi",
      `    path: ${join(models, "multi-io.onnx")}`,
      "  - name: wide",
      `    path: ${join(models, "wide-mlp.onnx")}`,
      "  - name: mixed",
      "    backend: custom",
      `    path: ${join(models, "binary-mixed.mjs")}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(() => srv.close());

type Value = number | boolean;

const SIZE: Record<string, number> = { BOOL: 1, UINT8: 1, FP32: 4, FP64: 8, INT64: 8 };

/** Little-endian bytes of `values` as `datatype`. */
function bytesOf(datatype: string, values: readonly Value[]): Buffer {
  const buf = Buffer.alloc(values.length * SIZE[datatype]!);
  values.forEach((v, i) => {
    if (datatype === "FP32") buf.writeFloatLE(v as number, i * 4);
    else if (datatype === "FP64") buf.writeDoubleLE(v as number, i * 8);
    else if (datatype === "INT64") buf.writeBigInt64LE(BigInt(v as number), i * 8);
    else if (datatype === "BOOL") buf.writeUInt8(v ? 1 : 0, i);
    else buf.writeUInt8(v as number, i);
  });
  return buf;
}

/** JSON values of little-endian bytes (INT64 as numbers, BOOL as booleans, as JSON responses carry them). */
function valuesOf(datatype: string, buf: Buffer): Value[] {
  const n = buf.length / SIZE[datatype]!;
  return Array.from({ length: n }, (_, i) => {
    if (datatype === "FP32") return buf.readFloatLE(i * 4);
    if (datatype === "FP64") return buf.readDoubleLE(i * 8);
    if (datatype === "INT64") return Number(buf.readBigInt64LE(i * 8));
    if (datatype === "BOOL") return buf[i] === 1;
    return buf[i]!;
  });
}

interface OipInput {
  name: string;
  shape: number[];
  datatype: string;
  data: Value[];
}

interface Reply {
  status: number;
  headers: Headers;
  body: any;
  raw: Buffer;
}

async function post(
  path: string,
  body: Uint8Array<ArrayBuffer> | string,
  headers: Record<string, string>,
): Promise<Reply> {
  const res = await fetch(`${srv.url}${path}`, { method: "POST", headers, body });
  const raw = Buffer.from(await res.arrayBuffer());
  const type = res.headers.get("content-type") ?? "";
  let parsed: unknown;
  if (type.startsWith("application/json")) parsed = JSON.parse(raw.toString("utf8"));
  return { status: res.status, headers: res.headers, body: parsed, raw };
}

/** A binary OIP request: JSON header, then `chunks`; Inference-Header-Content-Length set. */
/** The header entries of `inputs` sent as binary data, in order. */
function binaryInputs(inputs: readonly OipInput[]) {
  return inputs.map((i) => ({
    name: i.name,
    shape: i.shape,
    datatype: i.datatype,
    parameters: { binary_data_size: i.data.length * SIZE[i.datatype]! },
  }));
}

function binaryRequest(header: unknown, chunks: readonly Buffer[], extra: Record<string, string> = {}) {
  const json = Buffer.from(JSON.stringify(header));
  return {
    body: Buffer.concat([json, ...chunks]),
    headers: {
      "content-type": "application/octet-stream",
      "inference-header-content-length": String(json.length),
      ...extra,
    },
  };
}

/** Sends `inputs` on /v2 with the named ones as binary data; `requestParams`/`outputs` go in the header as given. */
async function infer(
  model: string,
  inputs: readonly OipInput[],
  binaryInputs: ReadonlySet<string>,
  extra: { parameters?: unknown; outputs?: unknown; path?: string } = {},
): Promise<Reply> {
  const path = extra.path ?? `/v2/models/${model}/infer`;
  const header: Record<string, unknown> = {
    inputs: inputs.map((i) =>
      binaryInputs.has(i.name)
        ? {
            name: i.name,
            shape: i.shape,
            datatype: i.datatype,
            parameters: { binary_data_size: i.data.length * SIZE[i.datatype]! },
          }
        : i,
    ),
  };
  if (extra.parameters) header.parameters = extra.parameters;
  if (extra.outputs) header.outputs = extra.outputs;
  if (binaryInputs.size === 0) {
    return post(path, JSON.stringify(header), { "content-type": "application/json" });
  }
  const chunks = inputs.filter((i) => binaryInputs.has(i.name)).map((i) => bytesOf(i.datatype, i.data));
  const req = binaryRequest(header, chunks);
  return post(path, req.body, req.headers);
}

/** The response's outputs in JSON form: binary ones read from the bytes after the JSON header. */
type Output = { name: string; datatype: string; shape: number[]; data: Value[] };

function outputsOf(res: Reply): Output[] {
  assert.equal(res.status, 200, res.body ? JSON.stringify(res.body) : res.raw.toString());
  if (res.body) return res.body.outputs.map(asFp32);
  assert.equal(res.headers.get("content-type"), "application/octet-stream");
  const len = Number(res.headers.get("inference-header-content-length"));
  const header = JSON.parse(res.raw.subarray(0, len).toString("utf8"));
  let at = len;
  const outputs = header.outputs.map((o: any) => {
    if (!o.parameters) return o;
    const size = o.parameters.binary_data_size as number;
    const n = o.shape.reduce((a: number, b: number) => a * b, 1);
    assert.equal(size, n * SIZE[o.datatype]!, `${o.name}: binary_data_size`);
    const data = valuesOf(o.datatype, res.raw.subarray(at, at + size));
    at += size;
    return { name: o.name, datatype: o.datatype, shape: o.shape, data };
  });
  assert.equal(at, res.raw.length, "no bytes after the last binary output");
  return outputs.map(asFp32);
}

const MULTI: OipInput[] = [
  { name: "a", shape: [2, 3], datatype: "FP32", data: [1, 2.5, -3, 0.125, 1e6, -0.5] },
  { name: "b", shape: [2, 3], datatype: "FP64", data: [0.1, 0.25, 1, -7.75, 1e-300, Math.PI] },
  { name: "ids", shape: [2], datatype: "INT64", data: [123456789012, -42] },
  { name: "mask", shape: [2], datatype: "BOOL", data: [true, false] },
  { name: "pixels", shape: [2, 4], datatype: "UINT8", data: [0, 1, 128, 255, 9, 8, 7, 6] },
  { name: "scale", shape: [], datatype: "FP32", data: [2.5] },
];
const ALL_MULTI = new Set(MULTI.map((i) => i.name));
const NONE = new Set<string>();

/** Deterministic rows: `rows` × `width` float32 values. */
function floatRows(rows: number, width: number, seed: number): number[] {
  let x = seed;
  return Array.from({ length: rows * width }, () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return Math.fround((x / 2147483648) * 100 - 20);
  });
}

describe("OIP binary tensor data: same answers as JSON", () => {
  let reference: Awaited<ReturnType<typeof outputsOf>>;

  before(async () => {
    reference = outputsOf(await infer("multi", MULTI, NONE));
    assert.equal(reference.length, 5);
  });

  it("multi-io, every dtype (FP32, FP64, INT64, BOOL, UINT8, a scalar): binary in, JSON out", async () => {
    const res = await infer("multi", MULTI, ALL_MULTI);
    assert.equal(res.headers.get("content-type")?.startsWith("application/json"), true);
    assert.deepEqual(outputsOf(res), reference);
  });

  it("JSON in, binary out (binary_data_output), with the documented layout", async () => {
    const res = await infer("multi", MULTI, NONE, { parameters: { binary_data_output: true } });
    assert.equal(res.body, undefined, "an octet-stream body");
    const outputs = outputsOf(res);
    assert.deepEqual(outputs, reference);
    const len = Number(res.headers.get("inference-header-content-length"));
    const header = JSON.parse(res.raw.subarray(0, len).toString());
    assert.equal(header.model_name, "multi");
    for (const o of header.outputs) {
      assert.equal(o.data, undefined);
      assert.equal(typeof o.parameters.binary_data_size, "number");
    }
  });

  it("binary both ways, also under /versions/1", async () => {
    for (const path of ["/v2/models/multi/infer", "/v2/models/multi/versions/1/infer"]) {
      const res = await infer("multi", MULTI, ALL_MULTI, { parameters: { binary_data_output: true }, path });
      assert.deepEqual(outputsOf(res), reference);
    }
  });

  it("mixed: some inputs JSON data, some binary; per-output binary_data overrides binary_data_output", async () => {
    const res = await infer("multi", MULTI, new Set(["ids", "a", "scale"]), {
      parameters: { binary_data_output: true },
      outputs: [
        { name: "ids_next", parameters: { binary_data: true } },
        { name: "mask_inverted", parameters: { binary_data: false } },
        { name: "scaled" },
      ],
    });
    const len = Number(res.headers.get("inference-header-content-length"));
    const header = JSON.parse(res.raw.subarray(0, len).toString());
    const by = Object.fromEntries(header.outputs.map((o: any) => [o.name, o]));
    assert.deepEqual(Object.keys(by).sort(), ["ids_next", "mask_inverted", "scaled"]);
    assert.ok(by.ids_next.parameters && !by.ids_next.data, "ids_next binary");
    assert.ok(by.scaled.parameters && !by.scaled.data, "scaled binary (request default)");
    assert.deepEqual(by.mask_inverted.data, [false, true], "mask_inverted JSON");
    const want = reference.filter((o) => o.name in by);
    assert.deepEqual(
      outputsOf(res).sort((x, y) => x.name.localeCompare(y.name)),
      want.sort((x, y) => x.name.localeCompare(y.name)),
    );
  });

  it("FP32 in JSON answers: the shortest text that reads back, null for NaN and ±Infinity", async () => {
    // Binary floats can carry what JSON cannot; a * 1 passes them through the model.
    const a = [Number.NaN, Number.POSITIVE_INFINITY, -0, 1e-40, 3.4028234663852886e38, 1 / 3];
    const inputs = MULTI.map((i) =>
      i.name === "a" ? { ...i, data: a } : i.name === "scale" ? { ...i, data: [1] } : i,
    );
    for (const path of ["/v2/models/multi/infer", "/v2/models/multi/versions/1/infer"]) {
      const res = await infer("multi", inputs, new Set(["a"]), { outputs: [{ name: "scaled" }], path });
      assert.equal(res.status, 200, res.raw.toString());
      assert.match(res.raw.toString(), /"data":\[null,null,0,1e-40,3\.4028235e\+38,0\.33333334\]/);
    }
  });

  it("Inference-Header-Content-Length is honoured whatever the Content-Type (or none), as Triton does", async () => {
    const header = {
      inputs: binaryInputs(MULTI),
    };
    const req = binaryRequest(
      header,
      MULTI.map((i) => bytesOf(i.datatype, i.data)),
    );
    for (const type of ["application/json", "text/plain", undefined]) {
      const headers: Record<string, string> = { ...req.headers };
      if (type) headers["content-type"] = type;
      else delete headers["content-type"];
      const res = await post("/v2/models/multi/infer", new Uint8Array(req.body), headers);
      assert.deepEqual(outputsOf(res), reference, `content-type ${type}`);
    }
  });

  it("a JSON-only body sent as octet-stream without the header is read whole (Triton's rule)", async () => {
    const res = await post("/v2/models/multi/infer", JSON.stringify({ inputs: MULTI }), {
      "content-type": "application/octet-stream",
    });
    assert.deepEqual(outputsOf(res), reference);
  });

  it("server metadata lists the binary_tensor_data extension", async () => {
    const res = await fetch(`${srv.url}/v2`);
    assert.deepEqual(((await res.json()) as { extensions: string[] }).extensions, [
      "binary_tensor_data",
      "model_repository",
    ]);
  });

  it("churn-tree, 600 rows, in every direction", async () => {
    const rows = 600;
    const input: OipInput = {
      name: "features",
      shape: [rows, 6],
      datatype: "FP32",
      data: floatRows(rows, 6, 7),
    };
    const json = outputsOf(await infer("tree", [input], NONE));
    assert.equal(json.find((o) => o.name === "label")!.data.length, rows);
    const out = { parameters: { binary_data_output: true } };
    assert.deepEqual(outputsOf(await infer("tree", [input], new Set(["features"]))), json, "binary in");
    assert.deepEqual(outputsOf(await infer("tree", [input], NONE, out)), json, "binary out");
    assert.deepEqual(outputsOf(await infer("tree", [input], new Set(["features"]), out)), json, "both");
  });

  it("wide-mlp, 2,000 rows × 32 floats: binary and JSON give identical outputs", async () => {
    const rows = 2000;
    const input: OipInput = {
      name: "features",
      shape: [rows, 32],
      datatype: "FP32",
      data: floatRows(rows, 32, 11).map((v) => Math.fround(v / 25)),
    };
    const json = outputsOf(await infer("wide", [input], NONE));
    const binary = outputsOf(
      await infer("wide", [input], new Set(["features"]), { parameters: { binary_data_output: true } }),
    );
    assert.equal(binary[0]!.data.length, rows * 2);
    assert.deepEqual(binary, json);
  });
});

describe("native route: raw application/octet-stream tensors", () => {
  const rows = 300;
  const data = floatRows(rows, 6, 3);
  const raw = bytesOf("FP32", data);
  let json: Record<string, unknown>;

  before(async () => {
    const res = await postJson(`${srv.url}/v1/models/tree/predict`, {
      inputs: { features: { data, shape: [rows, 6] } },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    json = res.body.outputs;
  });

  const octet = { "content-type": "application/octet-stream" };

  it("octet-stream in, JSON out: with X-Tensor-Shape, and with dim 0 inferred from the byte length", async () => {
    for (const headers of [{ ...octet, "x-tensor-shape": `${rows},6` }, octet]) {
      const res = await post("/v1/models/tree/predict", new Uint8Array(raw), headers);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body.outputs, json);
      assert.equal(res.body.model, "tree");
    }
  });

  it("octet-stream both ways: churn-tree's two outputs need ?outputs= to pick one", async () => {
    const accept = { ...octet, accept: "application/octet-stream" };
    const proba = await post("/v1/models/tree/predict?outputs=probabilities", new Uint8Array(raw), accept);
    assert.equal(proba.status, 200, proba.raw.toString());
    assert.equal(proba.headers.get("content-type"), "application/octet-stream");
    assert.equal(proba.headers.get("x-tensor-shape"), `${rows},2`);
    assert.equal(proba.headers.get("x-tensor-datatype"), "FP32");
    assert.equal(proba.headers.get("x-tensor-name"), "probabilities");
    assert.deepEqual(valuesOf("FP32", proba.raw), (json.probabilities as number[][]).flat().map(Math.fround));

    const label = await post("/v1/models/tree/predict?outputs=label", new Uint8Array(raw), accept);
    assert.equal(label.headers.get("x-tensor-datatype"), "INT64");
    assert.equal(label.headers.get("x-tensor-shape"), String(rows));
    assert.deepEqual(valuesOf("INT64", label.raw), json.label);
  });

  it("JSON in, octet-stream out (outputs in the body), and wide-mlp's single output needs no selection", async () => {
    const res = await post(
      "/v1/models/tree/predict",
      JSON.stringify({ inputs: { features: { data, shape: [rows, 6] } }, outputs: ["probabilities"] }),
      { "content-type": "application/json", accept: "application/octet-stream" },
    );
    assert.deepEqual(valuesOf("FP32", res.raw), (json.probabilities as number[][]).flat().map(Math.fround));

    const wideRows = floatRows(50, 32, 5).map((v) => Math.fround(v / 25));
    const wideJson = await postJson(`${srv.url}/v1/models/wide/predict`, {
      inputs: { features: { data: wideRows, shape: [50, 32] } },
    });
    const wide = await post("/v1/models/wide/predict", new Uint8Array(bytesOf("FP32", wideRows)), {
      ...octet,
      accept: "application/octet-stream",
    });
    assert.equal(wide.headers.get("x-tensor-shape"), "50,2");
    assert.deepEqual(
      valuesOf("FP32", wide.raw),
      (wideJson.body.outputs.probabilities as number[][]).flat().map(Math.fround),
    );
  });

  it("a plain JSON request still answers JSON (Accept */* or application/json first)", async () => {
    for (const accept of ["*/*", "application/json, application/octet-stream"]) {
      const res = await post(
        "/v1/models/wide/predict",
        JSON.stringify({ inputs: { features: { data: floatRows(1, 32, 1), shape: [1, 32] } } }),
        { "content-type": "application/json", accept },
      );
      assert.equal(res.status, 200);
      assert.ok(res.body.outputs.probabilities, accept);
    }
  });
});

describe("binary bodies as the model's input memory", () => {
  // Large binary tensors are views of the body's own memory (placed so the part after the JSON
  // header is 8-byte aligned) and the body goes to the model's thread whole; a tensor that is
  // not aligned for its element size within that part, or small, is copied. Whatever the header's
  // length and however the body arrives (1.9 MB here), the answer is the arithmetic's.
  const n = 4_001;
  const a = Array.from({ length: n * 40 }, (_, i) => (i % 97) / 4);
  const b = Array.from({ length: n * 40 }, (_, i) => (i % 13) - 6);
  const c = Array.from({ length: n * 20 }, (_, i) => i / 3);
  const d = Array.from({ length: n }, (_, i) => i % 256);
  const inputs: OipInput[] = [
    // In the body: a and b (views, sharing the body), d (small), c (8-byte elements at an odd offset).
    { name: "a", shape: [n, 40], datatype: "FP32", data: a },
    { name: "b", shape: [n, 40], datatype: "FP32", data: b },
    { name: "d", shape: [n, 1], datatype: "UINT8", data: d },
    { name: "c", shape: [n, 20], datatype: "FP64", data: c },
  ];
  const header = {
    inputs: binaryInputs(inputs),
    parameters: { binary_data_output: true },
  };
  const tensors = inputs.map((i) => bytesOf(i.datatype, i.data));

  function check(res: Reply): void {
    assert.equal(res.status, 200, res.raw.toString("utf8", 0, 400));
    assert.equal(res.headers.get("content-length"), String(res.raw.length));
    assert.equal(res.headers.get("transfer-encoding"), null);
    const out = Object.fromEntries(outputsOf(res).map((o) => [o.name, o.data]));
    assert.deepEqual(
      out.sum,
      a.map((v, i) => Math.fround(v + b[i]!)),
    );
    assert.deepEqual(
      out.c2,
      c.map((v) => v * 2),
    );
    assert.deepEqual(out.d, d);
  }

  it("a JSON header of every length modulo 8", async () => {
    for (let pad = 0; pad < 8; pad++) {
      const json = Buffer.from(JSON.stringify(header) + " ".repeat(pad));
      check(
        await post("/v2/models/mixed/infer", new Uint8Array(Buffer.concat([json, ...tensors])), {
          "content-type": "application/octet-stream",
          "inference-header-content-length": String(json.length),
        }),
      );
    }
  });

  it("a chunked body (no Content-Length), in pieces of odd sizes", async () => {
    const json = Buffer.from(JSON.stringify(header));
    const body = Buffer.concat([json, ...tensors]);
    let at = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (at >= body.length) return controller.close();
        controller.enqueue(new Uint8Array(body.subarray(at, at + 7_777)));
        at += 7_777;
      },
    });
    const res = await fetch(`${srv.url}/v2/models/mixed/infer`, {
      method: "POST",
      headers: {
        "content-type": "application/octet-stream",
        "inference-header-content-length": String(json.length),
      },
      body: stream,
      duplex: "half",
    } as RequestInit);
    const raw = Buffer.from(await res.arrayBuffer());
    check({ status: res.status, headers: res.headers, body: undefined, raw });
  });
});

describe("malformed binary requests: 4xx with an MP_ERR code, server stays ready", () => {
  const features = (rows: number) => ({ name: "features", shape: [rows, 6], datatype: "FP32" });
  const sized = (rows: number, size = rows * 24) => ({
    ...features(rows),
    parameters: { binary_data_size: size },
  });
  const twoRows = bytesOf("FP32", floatRows(2, 6, 1));

  async function expectError(
    res: Reply | Promise<Reply>,
    status: number,
    code: string,
    message?: RegExp,
  ): Promise<void> {
    const r = await res;
    assert.equal(r.status, status, JSON.stringify(r.body));
    assert.equal(r.body.code ?? r.body.error?.code, code);
    if (message) assert.match(r.body.error?.message ?? r.body.error, message);
  }

  const send = (header: unknown, chunks: Buffer[], headers: Record<string, string> = {}) => {
    const req = binaryRequest(header, chunks, headers);
    return post("/v2/models/tree/infer", new Uint8Array(req.body), req.headers);
  };
  const sendRaw = (body: Buffer | string, headers: Record<string, string>) =>
    post("/v2/models/tree/infer", typeof body === "string" ? body : new Uint8Array(body), {
      "content-type": "application/octet-stream",
      ...headers,
    });

  it("Inference-Header-Content-Length missing, invalid, zero or beyond the body", async () => {
    const header = Buffer.from(JSON.stringify({ inputs: [sized(2)] }));
    const body = Buffer.concat([header, twoRows]);
    await expectError(sendRaw(body, {}), 400, "MP_ERR_BINARY_HEADER_LENGTH", /missing/);
    await expectError(
      sendRaw(JSON.stringify({ inputs: [sized(2)] }), {}),
      400,
      "MP_ERR_BINARY_HEADER_LENGTH",
      /no Inference-Header-Content-Length/,
    );
    for (const bad of ["abc", "-5", "12.5", ""]) {
      await expectError(
        sendRaw(body, { "inference-header-content-length": bad }),
        400,
        "MP_ERR_BINARY_HEADER_LENGTH",
        /whole number/,
      );
    }
    await expectError(
      sendRaw(body, { "inference-header-content-length": "0" }),
      400,
      "MP_ERR_BINARY_HEADER_LENGTH",
      /raw tensor body/,
    );
    await expectError(
      sendRaw(body, { "inference-header-content-length": String(body.length + 1) }),
      400,
      "MP_ERR_BINARY_HEADER_LENGTH",
      /beyond the \d+-byte body/,
    );
  });

  it("binary_data_size in a plain JSON request", () =>
    expectError(
      post("/v2/models/tree/infer", JSON.stringify({ inputs: [sized(2)] }), {
        "content-type": "application/json",
      }),
      400,
      "MP_ERR_BINARY_HEADER_LENGTH",
      /no binary part/,
    ));

  it("binary_data_size that does not match the tensor's byte size, or runs past the body", async () => {
    await expectError(
      send({ inputs: [sized(2, 40)] }, [twoRows.subarray(0, 40)]),
      400,
      "MP_ERR_BINARY_DATA_SIZE",
      /40 bytes, but 12 FP32 elements need 48/,
    );
    await expectError(
      send({ inputs: [sized(2, 48)] }, [twoRows.subarray(0, 40)]),
      400,
      "MP_ERR_BINARY_DATA_SIZE",
      /only 40 bytes remain/,
    );
    await expectError(
      send({ inputs: [sized(2, -1)] }, [twoRows]),
      400,
      "MP_ERR_BINARY_DATA_SIZE",
      /non-negative integer/,
    );
  });

  it("trailing bytes after the last binary input", () =>
    expectError(
      send({ inputs: [sized(2)] }, [twoRows, Buffer.from([1, 2, 3])]),
      400,
      "MP_ERR_BINARY_TRAILING_BYTES",
      /3 bytes follow/,
    ));

  it("a malformed JSON header, and a __proto__ key", async () => {
    const text = '{"inputs": [';
    await expectError(
      sendRaw(Buffer.concat([Buffer.from(text), twoRows]), {
        "inference-header-content-length": String(text.length),
      }),
      400,
      "MP_ERR_REQUEST_MALFORMED_JSON",
      /JSON header/,
    );
    const poisoned = `{"__proto__": {"x": 1}, "inputs": [${JSON.stringify(sized(2))}]}`;
    await expectError(
      sendRaw(Buffer.concat([Buffer.from(poisoned), twoRows]), {
        "inference-header-content-length": String(poisoned.length),
      }),
      400,
      "MP_ERR_REQUEST_MALFORMED_JSON",
      /prototype/,
    );
  });

  it("the same checks as JSON: datatype, shape, both data and binary_data_size, BOOL bytes", async () => {
    await expectError(
      send({ inputs: [{ ...sized(2), datatype: "FP64", parameters: { binary_data_size: 96 } }] }, [
        Buffer.concat([twoRows, twoRows]),
      ]),
      400,
      "MP_ERR_INPUT_DATATYPE",
      /sent as FP64; the model expects FP32/,
    );
    await expectError(
      send({ inputs: [{ ...sized(2), shape: [3, 4] }] }, [twoRows]),
      400,
      "MP_ERR_INPUT_SHAPE",
      /\[3, 4\].*\[-1, 6\]/,
    );
    await expectError(
      send({ inputs: [{ ...sized(2), data: [1] }] }, [twoRows]),
      400,
      "MP_ERR_REQUEST_INVALID",
      /both "data" and parameters.binary_data_size/,
    );
    const inputs = MULTI.map((i) => ({
      name: i.name,
      shape: i.shape,
      datatype: i.datatype,
      parameters: { binary_data_size: i.data.length * SIZE[i.datatype]! },
    }));
    const chunks = MULTI.map((i) => bytesOf(i.datatype, i.data));
    chunks[3] = Buffer.from([1, 2]); // mask: BOOL bytes must be 0 or 1
    const req = binaryRequest({ inputs }, chunks);
    await expectError(
      post("/v2/models/multi/infer", new Uint8Array(req.body), req.headers),
      400,
      "MP_ERR_INPUT_DATATYPE",
      /'mask'.*element 1 is the byte 2/,
    );
  });

  it("an unknown input's bytes are skipped and it is reported by name", () =>
    expectError(
      send(
        {
          inputs: [
            sized(2),
            { name: "extra", shape: [1], datatype: "FP32", parameters: { binary_data_size: 4 } },
          ],
        },
        [twoRows, Buffer.alloc(4)],
      ),
      400,
      "MP_ERR_INPUT_UNKNOWN",
      /'extra'/,
    ));

  it("output parameters must be booleans", () =>
    expectError(
      send({ inputs: [sized(2)], parameters: { binary_data_output: "yes" } }, [twoRows]),
      400,
      "MP_ERR_REQUEST_INVALID",
      /binary_data_output must be true or false/,
    ));

  it("native: several inputs, bad X-Tensor-Shape, bytes that fit no shape, several outputs for a raw answer", async () => {
    const octet = { "content-type": "application/octet-stream" };
    await expectError(
      post("/v1/models/multi/predict", new Uint8Array(12), octet),
      400,
      "MP_ERR_REQUEST_INVALID",
      /6 inputs .* \/v2\/models\/\{model\}\/infer/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows), { ...octet, "x-tensor-shape": "2,x" }),
      400,
      "MP_ERR_INPUT_SHAPE",
      /X-Tensor-Shape/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows), { ...octet, "x-tensor-shape": "2,5" }),
      400,
      "MP_ERR_INPUT_SHAPE",
      /\[2, 5\].*\[-1, 6\]/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows), { ...octet, "x-tensor-datatype": "FP64" }),
      400,
      "MP_ERR_INPUT_DATATYPE",
      /sent as FP64; the model expects FP32/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows), { ...octet, "x-tensor-shape": "3,6" }),
      400,
      "MP_ERR_BINARY_DATA_SIZE",
      /48 bytes, but 18 FP32 elements need 72/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows.subarray(0, 40)), octet),
      400,
      "MP_ERR_BINARY_DATA_SIZE",
      /not a whole number of rows/,
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(0), octet),
      400,
      "MP_ERR_INPUT_EMPTY_BATCH",
    );
    await expectError(
      post("/v1/models/tree/predict", new Uint8Array(twoRows), {
        ...octet,
        accept: "application/octet-stream",
      }),
      406,
      "MP_ERR_RESPONSE_NOT_ACCEPTABLE",
      /'label', 'probabilities'.*\?outputs=NAME/,
    );
    await expectError(
      post("/v1/models/tree/predict?outputs=proba", new Uint8Array(twoRows), octet),
      400,
      "MP_ERR_OUTPUT_UNKNOWN",
    );
    await expectError(
      post("/v1/models/tree/predict", "x", { "content-type": "text/plain" }),
      415,
      "MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE",
    );
  });

  it("a binary body over limits.maxBodyBytes", () =>
    expectError(
      post("/v1/models/wide/predict", new Uint8Array(2_000_128), {
        "content-type": "application/octet-stream",
      }),
      413,
      "MP_ERR_REQUEST_BODY_TOO_LARGE",
    ));

  it("a chunked binary body that grows past limits.maxBodyBytes", async () => {
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 2_100_000) return controller.close();
        sent += 65_536;
        controller.enqueue(new Uint8Array(65_536));
      },
    });
    const res = await fetch(`${srv.url}/v1/models/wide/predict`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: stream,
      duplex: "half",
    } as RequestInit).catch((err: Error) => err);
    // The server answers 413 and closes; a client still sending may see the reset instead.
    if (res instanceof Error) return;
    assert.equal(res.status, 413);
    assert.equal(
      ((await res.json()) as { error: { code: string } }).error.code,
      "MP_ERR_REQUEST_BODY_TOO_LARGE",
    );
  });

  it("never a 500, and the server stays ready and correct afterwards", async () => {
    assert.equal((await fetch(`${srv.url}/readyz`)).status, 200);
    const res = await infer("tree", [{ ...features(2), data: floatRows(2, 6, 1) }], new Set(["features"]));
    assert.equal(res.status, 200);
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /modelport_requests_total\{[^}]*status="5\d\d"/);
  });
});
