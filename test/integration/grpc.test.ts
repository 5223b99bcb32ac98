// The Open Inference Protocol over gRPC (server.grpcPort, src/grpc/) through a real listening
// server, spoken to by clients that are not modelport's: @grpc/grpc-js with @grpc/proto-loader
// loading src/grpc/inference.proto as it ships, and (where Debian's python3-grpcio and
// python3-grpc-tools are installed; .ci/run installs them) Python stubs generated from the same
// file. Every call is checked against the HTTP /v2 answer for the same input; auth, errors with
// their MP_ERR codes, hostile messages, deadlines, cancellation, request ids, metrics and the
// drain are each checked through the public surface. Tensor bytes are written and read here with
// Buffer's own methods, independently of src/protocol/.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { connect, type Settings } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { asFp32 } from "../helpers/fp32.js";
import { createGate, type Gate } from "../helpers/gate.js";
import { testModels } from "../helpers/models.js";
import { grpcPythonSkip, PYTHON, pythonGrpcStubs } from "../helpers/python.js";
import {
  CLI,
  type InProcessServer,
  postJson,
  REPO_ROOT,
  startChild,
  startInProcess,
  waitReady,
} from "../helpers/server.js";

const PROTO = join(REPO_ROOT, "src", "grpc", "inference.proto");
const KEY = "grpc-test-key-0001";
/** An admin key reads every series of /metrics (a client key reads only its own: docs/Multi-tenant.md). */
const ADMIN = "grpc-test-admin-key-0001";
const MAX_BODY = 200_000;
const SERVICE = "/inference.GRPCInferenceService";

const packageDefinition = loadSync(PROTO, { keepCase: true, longs: String, defaults: true });
const Service = (grpc.loadPackageDefinition(packageDefinition) as any).inference
  .GRPCInferenceService as grpc.ServiceClientConstructor;

let srv: InProcessServer;
let client: grpc.Client & Record<string, any>;
const gate = createGate();

// One BYTES input and one FP16 input, answered upper-cased and doubled: the datatypes the ONNX
// example models do not have. WORDS_HANDLER takes the BYTES input alone (FP16 has no typed
// contents field, so only a model without it can take every input typed).
const WORDS_HANDLER = `export function load() {
  return {
    inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }],
    outputs: [{ name: "upper", datatype: "BYTES", shape: [-1] }],
    batchable: false,
  };
}
export async function predict(batch) {
  const text = batch.text.data;
  return { upper: { datatype: "BYTES", shape: [text.length], data: text.map((s) => s.toUpperCase()) } };
}
`;
const ECHO_HANDLER = `export function load() {
  return {
    inputs: [{ name: "text", datatype: "BYTES", shape: [-1] }, { name: "half", datatype: "FP16", shape: [-1, 2] }],
    outputs: [{ name: "upper", datatype: "BYTES", shape: [-1] }, { name: "twice", datatype: "FP16", shape: [-1, 2] }],
    batchable: false,
  };
}
export async function predict(batch) {
  const text = batch.text.data;
  return {
    upper: { datatype: "BYTES", shape: [text.length], data: text.map((s) => s.toUpperCase()) },
    twice: { datatype: "FP16", shape: batch.half.shape, data: Float32Array.from(batch.half.data, (v) => v * 2) },
  };
}
`;

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-grpc-"));
  writeFileSync(join(dir, "echo.mjs"), ECHO_HANDLER);
  writeFileSync(join(dir, "words.mjs"), WORDS_HANDLER);
  const file = join(dir, "grpc.yaml");
  writeFileSync(
    file,
    [
      `server: {apiKeys: [${KEY}], adminKeys: [${ADMIN}]}`,
      `limits: {maxBodyBytes: ${MAX_BODY}, timeoutMs: 600000}`,
      "models:",
      `  - {name: tree, path: "${join(models, "churn-tree.onnx")}"}`,
      `  - {name: multi, path: "${join(models, "multi-io.onnx")}"}`,
      `  - {name: multi4k, path: "${join(models, "multi-io.onnx")}", limits: {maxBatchRows: 4096}}`,
      `  - {name: echo, backend: custom, path: "${join(dir, "echo.mjs")}"}`,
      `  - {name: words, backend: custom, path: "${join(dir, "words.mjs")}"}`,
      gate.modelYaml("gate"),
    ].join("\n"),
  );
  srv = await startInProcess({ file, env: {} }, { grpc: true });
  client = new Service(srv.grpc!, grpc.credentials.createInsecure()) as any;
});

after(async () => {
  gate.openAll();
  client?.close();
  await srv?.close();
});

interface Answer {
  err: grpc.ServiceError | null;
  res: any;
  /** The initial metadata the server sent back. */
  initial: Record<string, unknown>;
}

/** One unary call; `key: null` sends no authorization. */
function call(
  method: string,
  request: object,
  opts: {
    key?: string | null;
    metadata?: Record<string, string>;
    deadlineMs?: number;
    on?: grpc.Client;
  } = {},
): Promise<Answer> & { cancel(): void } {
  const md = new grpc.Metadata();
  const key = opts.key === undefined ? KEY : opts.key;
  if (key !== null) md.set("authorization", `Bearer ${key}`);
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  const options: grpc.CallOptions = opts.deadlineMs ? { deadline: Date.now() + opts.deadlineMs } : {};
  let initial: Record<string, unknown> = {};
  let handle: grpc.ClientUnaryCall | undefined;
  const promise = new Promise<Answer>((resolve) => {
    handle = ((opts.on ?? client) as any)[method](
      request,
      md,
      options,
      (err: grpc.ServiceError | null, res: any) => resolve({ err, res, initial }),
    );
    handle!.on("metadata", (m: grpc.Metadata) => {
      initial = m.getMap();
    });
  });
  return Object.assign(promise, { cancel: () => handle!.cancel() });
}

/** Asserts a failed call: its gRPC code, and (when given) its MP_ERR code in the message and the trailer. */
function fails(a: Answer, code: grpc.status, mpCode?: string): void {
  assert.ok(a.err, `expected ${grpc.status[code]}, got an answer: ${JSON.stringify(a.res)}`);
  assert.equal(a.err.code, code, `${grpc.status[a.err.code]}: ${a.err.details}`);
  if (mpCode) {
    assert.match(a.err.details, new RegExp(`^${mpCode}: `));
    assert.deepEqual(a.err.metadata.get("mp-error-code"), [mpCode]);
  }
}

const http = (path: string, body: unknown) =>
  postJson(`${srv.url}${path}`, body, { authorization: `Bearer ${KEY}` });
const httpGet = async (path: string) =>
  (await fetch(`${srv.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } })).json() as Promise<any>;

type Value = number | boolean | string;
const SIZE: Record<string, number> = { BOOL: 1, UINT8: 1, FP16: 2, FP32: 4, FP64: 8, INT64: 8 };

/** Little-endian bytes of `values` (FP16 given as its half bits; BYTES as length-prefixed UTF-8). */
function bytesOf(datatype: string, values: readonly Value[]): Buffer {
  if (datatype === "BYTES") {
    return Buffer.concat(
      values.map((v) => {
        const s = Buffer.from(String(v));
        const len = Buffer.alloc(4);
        len.writeUInt32LE(s.length);
        return Buffer.concat([len, s]);
      }),
    );
  }
  const buf = Buffer.alloc(values.length * SIZE[datatype]!);
  values.forEach((v, i) => {
    if (datatype === "FP32") buf.writeFloatLE(v as number, i * 4);
    else if (datatype === "FP64") buf.writeDoubleLE(v as number, i * 8);
    else if (datatype === "INT64") buf.writeBigInt64LE(BigInt(v as number), i * 8);
    else if (datatype === "FP16") buf.writeUInt16LE(v as number, i * 2);
    else if (datatype === "BOOL") buf.writeUInt8(v ? 1 : 0, i);
    else buf.writeUInt8(v as number, i);
  });
  return buf;
}

/** JSON values of little-endian bytes, as HTTP's JSON carries them (FP16 as its half bits). */
function valuesOf(datatype: string, buf: Buffer): Value[] {
  if (datatype === "BYTES") {
    const out: string[] = [];
    for (let at = 0; at < buf.length; ) {
      const len = buf.readUInt32LE(at);
      out.push(buf.toString("utf8", at + 4, at + 4 + len));
      at += 4 + len;
    }
    return out;
  }
  return Array.from({ length: buf.length / SIZE[datatype]! }, (_, i) => {
    if (datatype === "FP32") return buf.readFloatLE(i * 4);
    if (datatype === "FP64") return buf.readDoubleLE(i * 8);
    if (datatype === "INT64") return Number(buf.readBigInt64LE(i * 8));
    if (datatype === "FP16") return buf.readUInt16LE(i * 2);
    if (datatype === "BOOL") return buf[i] === 1;
    return buf[i]!;
  });
}

/** A gRPC infer answer in HTTP's JSON form: [{name, datatype, shape, data}]. */
function asJson(res: any): { name: string; datatype: string; shape: number[]; data: Value[] }[] {
  assert.equal(
    res.raw_output_contents.length,
    res.outputs.length,
    "one raw_output_contents entry per output",
  );
  return res.outputs.map((o: any, i: number) => {
    assert.equal(o.contents, null, "outputs travel raw");
    return {
      name: o.name,
      datatype: o.datatype,
      shape: o.shape.map(Number),
      data: valuesOf(o.datatype, res.raw_output_contents[i]),
    };
  });
}

interface Input {
  name: string;
  datatype: string;
  shape: number[];
  data: Value[];
}

const raw = (model: string, inputs: Input[], extra: object = {}) => ({
  model_name: model,
  inputs: inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
  raw_input_contents: inputs.map((i) => bytesOf(i.datatype, i.data)),
  ...extra,
});

const CONTENTS: Record<string, string> = {
  FP32: "fp32_contents",
  FP64: "fp64_contents",
  INT64: "int64_contents",
  BOOL: "bool_contents",
  UINT8: "uint_contents",
  BYTES: "bytes_contents",
};

const typed = (model: string, inputs: Input[]) => ({
  model_name: model,
  inputs: inputs.map(({ name, datatype, shape, data }) => ({
    name,
    datatype,
    shape,
    contents: {
      [CONTENTS[datatype]!]: datatype === "BYTES" ? data.map((s) => Buffer.from(String(s))) : data,
    },
  })),
});

const TREE: Input[] = [
  { name: "features", datatype: "FP32", shape: [2, 6], data: [3, 95, 4, 1, 0, 20, 40, 30, 0, 24, 1, 5] },
];
const MULTI: Input[] = [
  { name: "a", datatype: "FP32", shape: [2, 3], data: [1, 2, 3, -0.5, 0, 0.25] },
  { name: "b", datatype: "FP64", shape: [2, 3], data: [0.1, 0.2, 0.3, -1e10, 1e-10, Math.PI] },
  { name: "ids", datatype: "INT64", shape: [2], data: [-5, 123456789012] },
  { name: "mask", datatype: "BOOL", shape: [2], data: [true, false] },
  { name: "pixels", datatype: "UINT8", shape: [2, 4], data: [0, 1, 255, 3, 10, 20, 30, 40] },
  { name: "scale", datatype: "FP32", shape: [], data: [2.5] },
];

/** Counts of modelport_requests_total by its label set, from /metrics. */
async function requestCounts(): Promise<Map<string, number>> {
  const text = await (
    await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
  ).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^modelport_requests_total\{([^}]*)\} (\d+)$/gm))
    out.set(m[1]!, Number(m[2]));
  return out;
}
const counted = (counts: Map<string, number>, model: string, route: string, status: number) =>
  counts.get(`model="${model}",route="${route}",status="${status}"`) ?? 0;

describe("gRPC: health, metadata and readiness", () => {
  it("ServerLive and ServerReady answer without an API key; ServerMetadata is GET /v2's", async () => {
    const live = await call("ServerLive", {}, { key: null });
    assert.equal(live.err, null);
    assert.deepEqual(live.res, { live: true });
    const ready = await call("ServerReady", {}, { key: null });
    assert.deepEqual(ready.res, { ready: true });
    const meta = await call("ServerMetadata", {});
    assert.deepEqual(meta.res, await httpGet("/v2"));
  });

  it("ModelMetadata is GET /v2/models/{m}'s, ModelReady its /ready; unknown names and versions are NOT_FOUND", async () => {
    for (const model of ["tree", "multi", "echo"]) {
      const meta = await call("ModelMetadata", { name: model });
      const fromHttp = await httpGet(`/v2/models/${model}`);
      const spec = (t: any) => ({ ...t, shape: t.shape.map(Number) });
      assert.deepEqual(
        { ...meta.res, inputs: meta.res.inputs.map(spec), outputs: meta.res.outputs.map(spec) },
        fromHttp,
      );
      assert.deepEqual((await call("ModelReady", { name: model, version: "1" })).res, { ready: true });
    }
    fails(await call("ModelMetadata", { name: "nope" }), grpc.status.NOT_FOUND, "MP_ERR_MODEL_NOT_FOUND");
    fails(await call("ModelReady", { name: "nope" }), grpc.status.NOT_FOUND, "MP_ERR_MODEL_NOT_FOUND");
    fails(
      await call("ModelReady", { name: "tree", version: "7" }),
      grpc.status.NOT_FOUND,
      "MP_ERR_MODEL_VERSION_NOT_FOUND",
    );
  });
});

describe("gRPC: ModelInfer answers what HTTP /v2 answers", () => {
  for (const [model, inputs] of [
    ["tree", TREE],
    ["multi", MULTI],
  ] as const) {
    it(`${model}: raw_input_contents and typed contents both give the JSON route's outputs`, async () => {
      const fromHttp = await http(`/v2/models/${model}/infer`, { inputs });
      assert.equal(fromHttp.status, 200, JSON.stringify(fromHttp.body));
      const viaRaw = await call("ModelInfer", raw(model, inputs));
      assert.equal(viaRaw.err, null, viaRaw.err?.details);
      assert.equal(viaRaw.res.model_name, model);
      assert.equal(viaRaw.res.model_version, "1");
      assert.deepEqual(asJson(viaRaw.res), fromHttp.body.outputs.map(asFp32));
      const viaTyped = await call("ModelInfer", typed(model, inputs));
      assert.equal(viaTyped.err, null, viaTyped.err?.details);
      assert.deepEqual(asJson(viaTyped.res), fromHttp.body.outputs.map(asFp32));
    });
  }

  it("large raw_input_contents, at every offset in the message (aligned where they arrived, or moved there): each output exact", async () => {
    const rows = 3000;
    const a = Array.from({ length: rows * 3 }, (_, i) => Math.fround(i / 7 - 100));
    const b = Array.from({ length: rows * 3 }, (_, i) => -i / 3 + 0.125);
    const ids = Array.from({ length: rows }, (_, i) => i * 1_000_003 - 5);
    const mask = Array.from({ length: rows }, (_, i) => i % 3 === 0);
    const pixels = Array.from({ length: rows * 4 }, (_, i) => (i * 37) & 0xff);
    // Small and large, 1-, 4- and 8-byte elements, in an order that puts them in every kind of gap.
    const inputs: Input[] = [
      { name: "mask", datatype: "BOOL", shape: [rows], data: mask },
      { name: "a", datatype: "FP32", shape: [rows, 3], data: a },
      { name: "scale", datatype: "FP32", shape: [], data: [0.5] },
      { name: "b", datatype: "FP64", shape: [rows, 3], data: b },
      { name: "pixels", datatype: "UINT8", shape: [rows, 4], data: pixels },
      { name: "ids", datatype: "INT64", shape: [rows], data: ids },
    ];
    const want = {
      scaled: a.map((v) => Math.fround(v * 0.5)),
      b_doubled: b.map((v) => v + v),
      ids_next: ids.map((v) => v + 1),
      mask_inverted: mask.map((v) => !v),
      pixel_total: Array.from({ length: rows }, (_, r) =>
        pixels.slice(r * 4, r * 4 + 4).reduce((x, y) => x + y, 0),
      ),
    };
    // The request id's length moves every raw entry by one byte more each time.
    for (let pad = 0; pad < 8; pad++) {
      const answer = await call("ModelInfer", raw("multi4k", inputs, { id: "i".repeat(pad + 1) }));
      assert.equal(answer.err, null, answer.err?.details);
      const got = Object.fromEntries(asJson(answer.res).map((o) => [o.name, o.data]));
      assert.deepEqual(got, want, `id of ${pad + 1} characters`);
    }
  });

  it("BYTES (raw and typed) and FP16 (raw, IEEE half bits) travel as HTTP's JSON values", async () => {
    const text = ["héllo", "", "wörld"];
    // 1.5, -2, 0.25 and 1000 as half bits; doubled they are 3, -4, 0.5 and 2000.
    const halfBits = [0x3e00, 0xc000, 0x3400, 0x63d0, 0x3c00, 0x0000];
    const inputs: Input[] = [
      { name: "text", datatype: "BYTES", shape: [3], data: text },
      { name: "half", datatype: "FP16", shape: [3, 2], data: halfBits },
    ];
    const viaRaw = await call("ModelInfer", raw("echo", inputs));
    assert.equal(viaRaw.err, null, viaRaw.err?.details);
    const [upper, twice] = asJson(viaRaw.res);
    assert.deepEqual(upper, { name: "upper", datatype: "BYTES", shape: [3], data: ["HÉLLO", "", "WÖRLD"] });
    assert.deepEqual(twice, {
      name: "twice",
      datatype: "FP16",
      shape: [3, 2],
      data: [0x4200, 0xc400, 0x3800, 0x67d0, 0x4000, 0x0000],
    });
    const fromHttp = await http("/v2/models/echo/infer", {
      inputs: [inputs[0], { ...inputs[1], data: [1.5, -2, 0.25, 1000, 1, 0] }],
    });
    assert.deepEqual(fromHttp.body.outputs[0], upper);
    assert.deepEqual(fromHttp.body.outputs[1].data, [3, -4, 0.5, 2000, 2, 0]);
    // BYTES typed, in bytes_contents (each element's UTF-8 bytes); FP16 typed is refused.
    const typedBytes = await call("ModelInfer", typed("words", [inputs[0]!]));
    assert.equal(typedBytes.err, null, typedBytes.err?.details);
    assert.deepEqual(asJson(typedBytes.res), [upper]);
    const halfTyped = await call("ModelInfer", {
      model_name: "echo",
      inputs: [
        { name: "text", datatype: "BYTES", shape: [1], contents: { bytes_contents: [Buffer.from("x")] } },
        { name: "half", datatype: "FP16", shape: [1, 2], contents: { fp32_contents: [1, 2] } },
      ],
    });
    fails(halfTyped, grpc.status.INVALID_ARGUMENT, "MP_ERR_REQUEST_INVALID");
    assert.match(
      halfTyped.err!.details,
      /FP16 has no typed contents field; send its bytes in raw_input_contents/,
    );
  });

  it("outputs: the requested ones only, in the model's order; an unknown one is INVALID_ARGUMENT", async () => {
    const some = await call(
      "ModelInfer",
      raw("multi", MULTI, { outputs: [{ name: "ids_next" }, { name: "scaled" }] }),
    );
    assert.deepEqual(
      some.res.outputs.map((o: any) => o.name),
      ["scaled", "ids_next"],
    );
    assert.deepEqual(asJson(some.res)[1]!.data, [-4, 123456789013]);
    fails(
      await call("ModelInfer", raw("tree", TREE, { outputs: [{ name: "nope" }] })),
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_OUTPUT_UNKNOWN",
    );
  });

  it("request ids: a sane x-request-id is echoed in the initial metadata and as the response id; the request's own id wins", async () => {
    const given = await call("ModelInfer", raw("tree", TREE), { metadata: { "x-request-id": "trace-42" } });
    assert.equal(given.initial["x-request-id"], "trace-42");
    assert.match(String(given.initial["x-modelport-instance"]), /:\d+$/);
    assert.equal(given.res.id, "trace-42");
    const own = await call("ModelInfer", raw("tree", TREE, { id: "mine" }), {
      metadata: { "x-request-id": "trace-43" },
    });
    assert.equal(own.res.id, "mine");
    assert.equal(own.initial["x-request-id"], "trace-43");
    const insane = await call("ModelInfer", raw("tree", TREE), {
      metadata: { "x-request-id": "no spaces allowed" },
    });
    assert.match(String(insane.initial["x-request-id"]), /^[0-9a-f-]{36}$/);
    assert.equal(insane.res.id, insane.initial["x-request-id"]);
    // Errors carry it too: the initial metadata goes out before the call is judged.
    const failed = await call(
      "ModelInfer",
      { model_name: "nope" },
      { metadata: { "x-request-id": "trace-44" } },
    );
    assert.equal(failed.initial["x-request-id"], "trace-44");
  });
});

describe("gRPC: API keys", () => {
  it("no key and a wrong key are UNAUTHENTICATED with their MP_ERR code; the right one passes; counted without a model label", async () => {
    const before = await requestCounts();
    fails(
      await call("ModelInfer", raw("tree", TREE), { key: null }),
      grpc.status.UNAUTHENTICATED,
      "MP_ERR_AUTH_REQUIRED",
    );
    fails(
      await call("ModelInfer", raw("tree", TREE), { key: "wrong-key-000" }),
      grpc.status.UNAUTHENTICATED,
      "MP_ERR_AUTH_INVALID",
    );
    fails(
      await call("ModelReady", { name: "tree" }, { key: null }),
      grpc.status.UNAUTHENTICATED,
      "MP_ERR_AUTH_REQUIRED",
    );
    fails(
      await call("ServerMetadata", {}, { key: null }),
      grpc.status.UNAUTHENTICATED,
      "MP_ERR_AUTH_REQUIRED",
    );
    assert.equal((await call("ModelInfer", raw("tree", TREE))).err, null);
    const now = await requestCounts();
    assert.equal(counted(now, "", "grpc:ModelInfer", 401) - counted(before, "", "grpc:ModelInfer", 401), 2);
    assert.equal(counted(now, "tree", "grpc:ModelInfer", 401), 0, "no model label before auth");
  });
});

describe("gRPC: refusals, each with its code; the server keeps answering", () => {
  const bad = async (request: object, code: grpc.status, mpCode: string, message?: RegExp) => {
    const a = await call("ModelInfer", request);
    fails(a, code, mpCode);
    if (message) assert.match(a.err!.details, message);
  };
  const treeInput = { name: "features", datatype: "FP32", shape: [2, 6] };
  const twelve = bytesOf("FP32", TREE[0]!.data);

  it("unknown model NOT_FOUND; wrong shapes, sizes, counts, datatypes and contents INVALID_ARGUMENT", async () => {
    await bad({ model_name: "nope" }, grpc.status.NOT_FOUND, "MP_ERR_MODEL_NOT_FOUND");
    // The message quotes the name: cut, or its trailer would pass the client's metadata limit and
    // the call would wait for its deadline (it did, with a 119 KB name).
    const long = await call("ModelInfer", { model_name: "n".repeat(150_000) }, { deadlineMs: 30_000 });
    fails(long, grpc.status.NOT_FOUND, "MP_ERR_MODEL_NOT_FOUND");
    assert.match(long.err!.details, /… \(\d+ characters\)$/);
    await bad(
      raw("tree", TREE, { model_version: "2" }),
      grpc.status.NOT_FOUND,
      "MP_ERR_MODEL_VERSION_NOT_FOUND",
    );
    await bad(
      { model_name: "tree", inputs: [{ ...treeInput, shape: [2, 5] }], raw_input_contents: [twelve] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_SHAPE",
      /has shape \[2, 5\]; the model expects \[-1, 6\]/,
    );
    await bad(
      { model_name: "tree", inputs: [treeInput], raw_input_contents: [twelve.subarray(4)] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_BINARY_DATA_SIZE",
      /44 bytes, but 12 FP32 elements need 48/,
    );
    await bad(
      { model_name: "tree", inputs: [treeInput], raw_input_contents: [twelve, twelve] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_REQUEST_INVALID",
      /raw_input_contents holds 2 entries but inputs lists 1/,
    );
    await bad(
      {
        model_name: "tree",
        inputs: [{ ...treeInput, contents: { fp32_contents: TREE[0]!.data } }],
        raw_input_contents: [twelve],
      },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_REQUEST_INVALID",
      /has contents, but the request sends raw_input_contents/,
    );
    await bad(
      { model_name: "tree", inputs: [{ ...treeInput, datatype: "FP33" }], raw_input_contents: [twelve] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_DATATYPE",
      /unknown datatype "FP33"/,
    );
    await bad(
      { model_name: "tree", inputs: [{ ...treeInput, contents: { int_contents: [1, 2] } }] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_DATATYPE",
      /values go in contents.fp32_contents, but contents.int_contents was sent/,
    );
    await bad(
      { model_name: "tree", inputs: [{ ...treeInput, contents: { fp32_contents: [1, 2, 3] } }] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_SHAPE",
      /needs 12 values but 3 were sent/,
    );
    await bad(
      { model_name: "tree", inputs: [treeInput] },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_REQUEST_INVALID",
      /carries no data/,
    );
    await bad(
      raw("tree", [{ ...TREE[0]!, name: "other" }]),
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_UNKNOWN",
    );
    await bad({ model_name: "multi", inputs: [] }, grpc.status.INVALID_ARGUMENT, "MP_ERR_INPUT_MISSING");
    await bad(
      typed(
        "multi",
        MULTI.map((i) => (i.name === "pixels" ? { ...i, data: [0, 1, 256, 3, 10, 20, 30, 40] } : i)),
      ),
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_OUT_OF_RANGE",
    );
    await bad(
      typed("tree", [{ ...TREE[0]!, data: [Number.NaN, ...TREE[0]!.data.slice(1)] }]),
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_INPUT_NOT_FINITE",
    );
  });

  it("hostile shapes: negative, past 2^63, past 2^53, and a BYTES shape claiming 10^15 elements", async () => {
    for (const shape of [
      ["-1", "6"],
      ["9223372036854775807", "6"],
      ["9007199254740993", "6"],
    ]) {
      await bad(
        { model_name: "tree", inputs: [{ ...treeInput, shape }], raw_input_contents: [twelve] },
        grpc.status.INVALID_ARGUMENT,
        "MP_ERR_INPUT_SHAPE",
        /shape must be non-negative integers up to 2\^53 - 1/,
      );
    }
    // Safe integers whose product is vast: the byte count is compared before anything is allocated.
    await bad(
      {
        model_name: "tree",
        inputs: [{ ...treeInput, shape: ["4503599627370495", "6"] }],
        raw_input_contents: [twelve],
      },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_BINARY_DATA_SIZE",
    );
    await bad(
      {
        model_name: "echo",
        inputs: [
          { name: "text", datatype: "BYTES", shape: ["1000000000000000"] },
          { name: "half", datatype: "FP16", shape: [1, 2] },
        ],
        raw_input_contents: [bytesOf("BYTES", ["a"]), bytesOf("FP16", [0, 0])],
      },
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_BINARY_DATA_SIZE",
      /cannot hold 1000000000000000 BYTES elements/,
    );
  });

  it("bytes that are no protobuf message are INVALID_ARGUMENT; a message over limits.maxBodyBytes RESOURCE_EXHAUSTED", async () => {
    const generic = new grpc.Client(srv.grpc!, grpc.credentials.createInsecure());
    try {
      const send = (bytes: Buffer) =>
        new Promise<grpc.ServiceError | null>((resolve) => {
          const md = new grpc.Metadata();
          md.set("authorization", `Bearer ${KEY}`);
          generic.makeUnaryRequest(
            `${SERVICE}/ModelInfer`,
            (b: Buffer) => b,
            (b: Buffer) => b,
            bytes,
            md,
            (err) => resolve(err),
          );
        });
      // raw_input_contents (field 7) claims 5 bytes and holds 1; field 100 with wire type 7, which
      // does not exist; an input (field 5) whose shape runs past the input's end.
      const garbage = [
        [0x3a, 0x05, 0x01],
        [0xa7, 0x06, 0x00],
        [0x2a, 0x03, 0x1a, 0x01, 0xff],
      ];
      for (const bytes of garbage.map((b) => Buffer.from(b))) {
        const err = await send(bytes);
        assert.equal(err?.code, grpc.status.INVALID_ARGUMENT, err?.details);
        assert.match(
          err!.details,
          /^MP_ERR_REQUEST_INVALID: the message is not a valid ModelInferRequest \(protobuf\)/,
        );
      }
    } finally {
      generic.close();
    }
    const huge = await call("ModelInfer", {
      model_name: "tree",
      inputs: [{ name: "features", datatype: "FP32", shape: [10_000, 6] }],
      raw_input_contents: [Buffer.alloc(240_000)],
    });
    assert.equal(huge.err?.code, grpc.status.RESOURCE_EXHAUSTED, huge.err?.details);
    assert.match(huge.err!.details, new RegExp(`larger than max \\(\\d+ vs\\.? ${MAX_BODY}\\)`));
    assert.deepEqual((await call("ServerLive", {})).res, { live: true });
    assert.equal((await call("ModelInfer", raw("tree", TREE))).err, null);
  });
});

describe("gRPC: HTTP/2 flow control", () => {
  it("each connection opens with stream and connection windows that hold a message of limits.maxBodyBytes", async () => {
    // What a client may send before the server's first WINDOW_UPDATE: with Node's 64 KiB windows a
    // large tensor would stop every 64 KiB for a round trip. Read off the connection by a plain
    // node:http2 client: the SETTINGS frame's initial window, and the connection window after the
    // server's opening WINDOW_UPDATE.
    const session = connect(`http://${srv.grpc!}`);
    try {
      const settings = await new Promise<Settings>((resolve, reject) => {
        session.once("remoteSettings", resolve);
        session.once("error", reject);
      });
      assert.ok(settings.initialWindowSize! >= MAX_BODY + 5, `stream window ${settings.initialWindowSize}`);
      // The WINDOW_UPDATE follows the SETTINGS frame on the same connection.
      const deadline = Date.now() + 5000;
      while ((session.state.remoteWindowSize ?? 0) < MAX_BODY + 5 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      assert.ok(
        session.state.remoteWindowSize! >= MAX_BODY + 5,
        `connection window ${session.state.remoteWindowSize}`,
      );
    } finally {
      session.close();
    }
  });
});

describe("gRPC: deadlines, cancellation and metrics", () => {
  /** The gate model's queue, read from the native model route. */
  const depth = async (): Promise<{ queuedRows: number; inFlight: number }> =>
    (await httpGet("/v1/models/gate")).batching;
  const until = async (what: string, ok: (d: { queuedRows: number; inFlight: number }) => boolean) => {
    for (let i = 0; !ok(await depth()); i++) {
      assert.ok(i < 3000, `${what}: ${JSON.stringify(await depth())}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const x = (v: number) => raw("gate", [{ name: "x", datatype: "FP32", shape: [1, 1], data: [v] }]);

  it("a call whose deadline passes is DEADLINE_EXCEEDED, counted 504; a bad x-request-timeout-ms is INVALID_ARGUMENT", async () => {
    const before = await requestCounts();
    // The deadline passes while the model holds the call, so the call must reach the model first,
    // which a busy machine may take a while to do: with a 300 ms deadline a CI run beside other
    // work saw the call end before it was at the model, and never counted as 504.
    const pending = call("ModelInfer", x(7), { deadlineMs: 5000 });
    await gate.started(7);
    const late = await pending;
    fails(late, grpc.status.DEADLINE_EXCEEDED);
    // The server ends the call at its own deadline, which is later than the client's by the time
    // the call took to reach it: the model is let go only once the server has counted the call
    // (opened at once, a busy machine let the model answer first, counted 200).
    for (
      let i = 0;
      counted(await requestCounts(), "gate", "grpc:ModelInfer", 504) ===
      counted(before, "gate", "grpc:ModelInfer", 504);
      i++
    ) {
      assert.ok(i < 1000, "the late call was never counted as 504");
      await new Promise((r) => setTimeout(r, 10));
    }
    gate.open(7);
    fails(
      await call("ModelInfer", raw("tree", TREE), { metadata: { "x-request-timeout-ms": "soon" } }),
      grpc.status.INVALID_ARGUMENT,
      "MP_ERR_REQUEST_INVALID",
    );
  });

  it("a call the client cancels has its queued work removed: the model never sees it", async () => {
    await until("the gate model never went idle", (d) => d.inFlight === 0 && d.queuedRows === 0);
    const busy = [call("ModelInfer", x(1))];
    await gate.started(1);
    busy.push(call("ModelInfer", x(2)));
    await until("the second call never reached the runner", (d) => d.inFlight === 2);
    const gone = call("ModelInfer", x(9));
    await until("the third call never queued", (d) => d.queuedRows === 1);
    gone.cancel();
    fails(await gone, grpc.status.CANCELLED);
    await until("the canceled call stayed in the queue", (d) => d.queuedRows === 0);
    gate.open(1);
    gate.open(2);
    for (const b of await Promise.all(busy)) assert.equal(b.err, null, b.err?.details);
    assert.equal(existsSync(join(gate.dir, "started-9")), false, "the canceled call reached the model");
  });

  it("every call is counted in modelport_requests_total under grpc:<method> with the HTTP-equivalent status", async () => {
    const before = await requestCounts();
    for (let i = 0; i < 3; i++) await call("ModelInfer", raw("tree", TREE));
    await call("ModelInfer", raw("tree", [{ ...TREE[0]!, shape: [3, 4] }]));
    await call("ModelMetadata", { name: "unserved-name" });
    await call("ServerLive", {});
    const now = await requestCounts();
    const grew = (model: string, route: string, status: number) =>
      counted(now, model, route, status) - counted(before, model, route, status);
    assert.equal(grew("tree", "grpc:ModelInfer", 200), 3);
    assert.equal(grew("tree", "grpc:ModelInfer", 400), 1);
    assert.equal(grew("", "grpc:ModelMetadata", 404), 1, "an unserved name is no label");
    assert.equal(grew("", "grpc:ServerLive", 200), 1);
    const text = await (
      await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
    ).text();
    assert.match(
      text,
      /modelport_request_duration_seconds_count\{model="tree",route="grpc:ModelInfer"\} \d+/,
    );
  });
});

describe("gRPC: a Python client generated from the same .proto", () => {
  it("calls ModelInfer with struct-packed raw_input_contents and reads the raw outputs back", {
    skip: grpcPythonSkip(),
  }, async () => {
    const out = pythonGrpcStubs();
    const script = `import json, struct, sys
import grpc
import inference_pb2 as pb, inference_pb2_grpc as rpc
channel = grpc.insecure_channel(sys.argv[1])
stub = rpc.GRPCInferenceServiceStub(channel)
auth = [("authorization", "Bearer ${KEY}")]
assert stub.ServerReady(pb.ServerReadyRequest()).ready
values = ${JSON.stringify(TREE[0]!.data)}
req = pb.ModelInferRequest(model_name="tree", id="from-python")
t = req.inputs.add(); t.name = "features"; t.datatype = "FP32"; t.shape.extend([2, 6])
req.raw_input_contents.append(struct.pack("<%df" % len(values), *values))
res = stub.ModelInfer(req, metadata=auth, timeout=30)
outputs = []
for o, raw in zip(res.outputs, res.raw_output_contents):
    fmt = {"FP32": "f", "INT64": "q"}[o.datatype]
    outputs.append({"name": o.name, "datatype": o.datatype, "shape": list(o.shape), "data": list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))})
try:
    stub.ModelInfer(pb.ModelInferRequest(model_name="tree"), metadata=[("authorization", "Bearer wrong-key-000")])
    code = None
except grpc.RpcError as e:
    code = [e.code().name, dict(e.trailing_metadata()).get("mp-error-code")]
print(json.dumps({"id": res.id, "outputs": outputs, "unauthenticated": code}))
`;
    writeFileSync(join(out, "client.py"), script);
    // Not spawnSync: the server it calls runs in this process's event loop.
    const child = spawn(PYTHON, [join(out, "client.py"), srv.grpc!], { cwd: out });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0, stderr);
    const got = JSON.parse(stdout);
    const fromHttp = await http("/v2/models/tree/infer", { inputs: TREE });
    assert.equal(got.id, "from-python");
    assert.deepEqual(got.outputs.map(asFp32), fromHttp.body.outputs.map(asFp32));
    assert.deepEqual(got.unauthenticated, ["UNAUTHENTICATED", "MP_ERR_AUTH_INVALID"]);
  });
});

describe("gRPC: draining (last: it closes the server)", () => {
  it("new calls UNAVAILABLE with MP_ERR_SERVER_SHUTTING_DOWN, health still answers, an in-flight call finishes, then the port closes", async () => {
    const held = call(
      "ModelInfer",
      raw("gate", [{ name: "x", datatype: "FP32", shape: [1, 1], data: [11] }]),
    );
    await gate.started(11);
    const closing = srv.close();
    fails(
      await call("ModelInfer", raw("tree", TREE)),
      grpc.status.UNAVAILABLE,
      "MP_ERR_SERVER_SHUTTING_DOWN",
    );
    const refused = await call("ModelMetadata", { name: "tree" });
    fails(refused, grpc.status.UNAVAILABLE, "MP_ERR_SERVER_SHUTTING_DOWN");
    assert.deepEqual(refused.err!.metadata.get("retry-after"), ["1"]);
    assert.deepEqual((await call("ServerReady", {})).res, { ready: false });
    assert.deepEqual((await call("ServerLive", {})).res, { live: true });
    gate.open(11);
    const finished = await held;
    assert.equal(finished.err, null, finished.err?.details);
    assert.deepEqual(asJson(finished.res)[0]!.data, [22]);
    await closing;
    fails(await call("ServerLive", {}, { deadlineMs: 5000 }), grpc.status.UNAVAILABLE);
  });
});

describe("gRPC: modelport serve --grpc-port", () => {
  it("--help lists it; with --processes 2 both processes answer on the one gRPC port; SIGTERM exits 0", async () => {
    const help = spawnSync(process.execPath, [CLI, "serve", "--help"], { encoding: "utf8" });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /--grpc-port PORT/);
    const model = join(await testModels(), "churn-tree.onnx");
    const child = await startChild([
      model,
      "--grpc-port",
      "0",
      "--processes",
      "2",
      "--drain-timeout-ms",
      "2000",
    ]);
    try {
      assert.equal((await waitReady(child.url, 90_000)).status, 200, child.output().slice(-2000));
      const address = /"grpcAddress":"([^"]+)"/.exec(child.output())?.[1];
      assert.match(address ?? "", /^127\.0\.0\.1:\d+$/, child.output().slice(-2000));
      assert.match(child.output(), /gRPC on 127\.0\.0\.1:\d+/);
      // Each channel is one HTTP/2 connection, handed to the processes in turn: fresh channels
      // reach both.
      // A process may still be loading when the first is ready: its calls fail until it is.
      const instances = new Set<string>();
      for (let i = 0; i < 400 && instances.size < 2; i++) {
        const c = new Service(address!, grpc.credentials.createInsecure(), {
          "grpc.use_local_subchannel_pool": 1,
        }) as any;
        try {
          const a = await call("ModelInfer", raw("churn-tree", TREE), { key: null, on: c });
          if (a.err === null) instances.add(String(a.initial["x-modelport-instance"]));
          else await new Promise((r) => setTimeout(r, 50));
        } finally {
          c.close();
        }
      }
      assert.equal(instances.size, 2, `answered by ${[...instances].join(", ")}`);
      assert.equal(await child.stop("SIGTERM"), 0, child.output().slice(-2000));
    } finally {
      await child.stop("SIGKILL");
    }
  });
});

/**
 * A server of its own (HTTP and gRPC) with one config line and the gate model `held`, started
 * before the describe block's tests and closed after them; `server()` is it once started.
 */
function serverWithGate(configLine: string): { held: Gate; server: () => InProcessServer } {
  let small: InProcessServer | undefined;
  const held = createGate();
  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-grpc-small-"));
    const file = join(dir, "grpc.yaml");
    writeFileSync(file, [configLine, "models:", held.modelYaml("held")].join("\n"));
    small = await startInProcess({ file, env: {} }, { grpc: true });
  });
  after(async () => {
    held.openAll();
    await small?.close();
  });
  return { held, server: () => small! };
}

describe("gRPC: server.connections on the gRPC port", () => {
  // Small limits: 2 connections, 3 calls at once on one connection, a connection with no call
  // closed after 1 s.
  const { held, server } = serverWithGate(
    "server: {connections: {maxConnections: 2, maxStreamsPerConnection: 3, keepAliveTimeoutMs: 1000}}",
  );

  /** A plain node:http2 connection to the gRPC port, with the server's SETTINGS once they came, or null when it was closed first. */
  const open = async () => {
    const session = connect(`http://${server().grpc!}`);
    session.on("error", () => {});
    const settings = await new Promise<Settings | null>((resolve) => {
      session.once("remoteSettings", resolve);
      session.once("close", () => resolve(null));
    });
    return { session, settings };
  };
  /** open(), again until the server takes it: a connection closed just before may still count there. */
  const accepted = async () => {
    for (let i = 0; ; i++) {
      const c = await open();
      if (c.settings || i >= 150) return c;
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it("advertises maxStreamsPerConnection, and one channel's calls beyond it wait for a free stream", async () => {
    const first = await accepted();
    try {
      assert.equal(first.settings?.maxConcurrentStreams, 3);
    } finally {
      first.session.close();
    }
    const channel = new Service(server().grpc!, grpc.credentials.createInsecure()) as any;
    try {
      const calls = [1, 2, 3, 4, 5].map((v) =>
        call("ModelInfer", raw("held", [{ name: "x", datatype: "FP32", shape: [1, 1], data: [v] }]), {
          key: null,
          on: channel,
        }),
      );
      // The requests the server holds: queued and in flight (batches of one row).
      const holding = async () => {
        const res = await fetch(`${server().url}/v1/models/held`);
        const { batching } = (await res.json()) as { batching: { queuedRows: number; inFlight: number } };
        return batching.queuedRows + batching.inFlight;
      };
      for (let i = 0; (await holding()) < 3; i++) {
        assert.ok(i < 3000, `the server holds ${await holding()} calls`);
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(await holding(), 3, "calls beyond the connection's streams reached the server");
      held.openAll();
      const answers = await Promise.all(calls);
      assert.deepEqual(
        answers.map((a) => a.err?.details ?? null),
        [null, null, null, null, null],
      );
    } finally {
      channel.close();
    }
  });

  it("closes a connection over maxConnections as it is accepted; one that closes frees its place", async () => {
    const a = await accepted();
    const b = await accepted();
    try {
      assert.ok(a.settings && b.settings, "the first two connections open");
      const c = await open();
      assert.equal(c.settings, null, "a third connection got the server's SETTINGS");
      a.session.close();
      await new Promise((r) => a.session.once("close", r));
      const d = await accepted();
      assert.ok(d.settings, "a connection after one closed was refused");
      d.session.close();
    } finally {
      a.session.close();
      b.session.close();
    }
  });

  it("closes a connection with no call after keepAliveTimeoutMs (GOAWAY)", async () => {
    const { session, settings } = await accepted();
    assert.ok(settings);
    const started = Date.now();
    const goaway = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 30_000);
      session.once("goaway", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    session.close();
    assert.ok(goaway, "no GOAWAY within 30 s");
    assert.ok(Date.now() - started >= 900, `GOAWAY after ${Date.now() - started} ms`);
  });
});

describe("gRPC: limits.maxBodyBytesInFlight", () => {
  // Messages of up to 200 KB, 300 KB of bodies and messages held at once, shared with the HTTP
  // port. A ModelInfer's size here is mostly its `id`.
  const { held, server } = serverWithGate("limits: {maxBodyBytes: 200000, maxBodyBytesInFlight: 300000}");

  const infer = (x: number, idBytes: number, deadlineMs?: number) => {
    const channel = new Service(server().grpc!, grpc.credentials.createInsecure()) as any;
    const request = raw("held", [{ name: "x", datatype: "FP32", shape: [1, 1], data: [x] }], {
      id: "i".repeat(idBytes),
    });
    return call("ModelInfer", request, { key: null, on: channel, ...(deadlineMs ? { deadlineMs } : {}) });
  };

  it("a call's message counts from its start to its end; one that would pass the budget is UNAVAILABLE MP_ERR_SERVER_BUSY", async () => {
    // 150 KB held by a call the gate keeps in progress.
    const first = infer(1, 150_000);
    await held.started(1);

    // 150 KB + 190 KB > 300 KB: refused at once, retryable, before the model sees it.
    const refused = await infer(2, 190_000, 10_000);
    assert.equal(refused.err?.code, grpc.status.UNAVAILABLE, refused.err?.details);
    assert.match(refused.err!.details, /^MP_ERR_SERVER_BUSY: .*limits\.maxBodyBytesInFlight: 300000/);
    assert.deepEqual(refused.err!.metadata.get("mp-error-code"), ["MP_ERR_SERVER_BUSY"]);
    assert.deepEqual(refused.err!.metadata.get("retry-after"), ["1"]);
    // The HTTP port draws on the same budget.
    const body = JSON.stringify({ rows: [[4]] });
    const http = await fetch(`${server().url}/v1/models/held/predict`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: body + " ".repeat(190_000 - body.length),
    });
    assert.equal(http.status, 503);
    assert.equal(((await http.json()) as { error: { code: string } }).error.code, "MP_ERR_SERVER_BUSY");
    // A small call still fits.
    held.open(3);
    const smallCall = await infer(3, 10, 10_000);
    assert.equal(smallCall.err, null, smallCall.err?.details);

    // Once the held call ends its bytes come back: the large call is answered.
    held.open(1);
    assert.equal((await first).err, null);
    held.open(2);
    const again = await infer(2, 190_000, 10_000);
    assert.equal(again.err, null, again.err?.details);
    assert.deepEqual(again.res.outputs[0].shape.map(Number), [1, 1]);
  });
});
