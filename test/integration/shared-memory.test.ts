// The system shared-memory extension through a real listening server: a client on the same host
// writes tensors to a POSIX shared memory object (a file in /dev/shm, as shm_open makes it),
// registers regions of it, and names them in infer requests instead of sending bytes; outputs come
// back through regions too. Answers must equal the JSON route's; every bad registration or
// reference gets its 4xx and code; regions belong to the key that registered them; files close
// when regions go; the same over gRPC (Triton's SystemSharedMemory calls and ModelInfer
// parameters, with @grpc/grpc-js loading src/grpc/inference.proto as it ships); and clients that
// are not ours (Python's multiprocessing.shared_memory with urllib, and with grpcio stubs generated
// from the same .proto) work against it. Tensor bytes are written and read with Buffer's own methods.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { mixedHandler } from "../helpers/mixed-handler.js";
import { testModels } from "../helpers/models.js";
import { grpcPythonSkip, PYTHON, pythonGrpcStubs } from "../helpers/python.js";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";

const SHM = "/dev/shm";
// Under the default server.sharedMemory.keyPrefix, "modelport_".
const PREFIX = `modelport_test-${process.pid}-`;
const KEY_A = "shared-memory-key-a";
const KEY_B = "shared-memory-key-b";
const A = { authorization: `Bearer ${KEY_A}` };
const B = { authorization: `Bearer ${KEY_B}` };
const MAX_REGIONS = 8;
const MAX_PER_KEY = 5;

let srv: InProcessServer;
let client: grpc.Client & Record<string, any>;
const PROTO = join(REPO_ROOT, "src", "grpc", "inference.proto");

/** The GRPCInferenceService client, from src/grpc/inference.proto as it ships. */
function grpcService(): grpc.ServiceClientConstructor {
  const definition = loadSync(PROTO, { keepCase: true, longs: String, defaults: true, oneofs: true });
  return (grpc.loadPackageDefinition(definition) as any).inference.GRPCInferenceService;
}

/** A unary gRPC call with key `key`: its error (null on success) and answer. */
function rpc(
  method: string,
  request: unknown,
  key = KEY_A,
): Promise<{ err: grpc.ServiceError | null; res: any }> {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${key}`);
  return new Promise((resolve) =>
    client[method](request, md, (err: grpc.ServiceError | null, res: any) => resolve({ err, res })),
  );
}

/** InferParameters naming a region, as Triton's gRPC client sets them. */
function grpcShm(region: string, byteSize: number, offset?: number) {
  return {
    shared_memory_region: { string_param: region },
    shared_memory_byte_size: { int64_param: String(byteSize) },
    ...(offset === undefined ? {} : { shared_memory_offset: { int64_param: String(offset) } }),
  };
}

/** A shared memory object of ours: its key (as shm_open names it) and its file. */
function object(name: string, bytes: Uint8Array | number): { key: string; file: string } {
  const file = join(SHM, PREFIX + name);
  writeFileSync(file, typeof bytes === "number" ? Buffer.alloc(bytes) : bytes);
  return { key: `/${PREFIX}${name}`, file };
}

function f32(values: readonly number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  for (const [i, v] of values.entries()) b.writeFloatLE(v, i * 4);
  return b;
}

function f64(values: readonly number[]): Buffer {
  const b = Buffer.alloc(values.length * 8);
  for (const [i, v] of values.entries()) b.writeDoubleLE(v, i * 8);
  return b;
}

async function call(
  method: string,
  path: string,
  headers: Record<string, string> = A,
  body?: unknown,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${srv.url}${path}`, {
    method,
    headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const register = (region: string, body: unknown, headers = A) =>
  call("POST", `/v2/systemsharedmemory/region/${region}/register`, headers, body);
const unregister = (region?: string, headers = A) =>
  call("POST", `/v2/systemsharedmemory${region ? `/region/${region}` : ""}/unregister`, headers);
const status = (region?: string, headers = A) =>
  call("GET", `/v2/systemsharedmemory${region ? `/region/${region}` : ""}/status`, headers);
const infer = (model: string, body: unknown, headers = A) =>
  postJson(`${srv.url}/v2/models/${model}/infer`, body, headers);

function shm(region: string, byteSize: number, offset?: number) {
  return {
    shared_memory_region: region,
    shared_memory_byte_size: byteSize,
    ...(offset === undefined ? {} : { shared_memory_offset: offset }),
  };
}

/** Files of ours this process holds open (the server runs in it). */
function openObjects(): string[] {
  return readdirSync("/proc/self/fd").flatMap((fd) => {
    try {
      const target = readlinkSync(join("/proc/self/fd", fd));
      return target.startsWith(join(SHM, PREFIX)) ? [target] : [];
    } catch {
      return [];
    }
  });
}

const A_VALUES = [1, 2, 3, 4, 5, 6, 7, 8];
const B_VALUES = [0.5, 0.25, -1, 2, 10, 20, 30, 40];
const C_VALUES = [1.5, -2.25, 1e-300, 3];
const D_VALUES = [7, 250];
const MIXED_JSON = {
  inputs: [
    { name: "a", shape: [2, 4], datatype: "FP32", data: A_VALUES },
    { name: "d", shape: [2, 1], datatype: "UINT8", data: D_VALUES },
    { name: "c", shape: [2, 2], datatype: "FP64", data: C_VALUES },
    { name: "b", shape: [2, 4], datatype: "FP32", data: B_VALUES },
  ],
};

/** The mixed model's inputs in one object: a at 0, c at 64, b at 128, d at 200. */
function mixedInputs() {
  const bytes = Buffer.alloc(256);
  f32(A_VALUES).copy(bytes, 0);
  f64(C_VALUES).copy(bytes, 64);
  f32(B_VALUES).copy(bytes, 128);
  Buffer.from(D_VALUES).copy(bytes, 200);
  return object("mixed-in", bytes);
}

const MIXED_SHM = (region: string) => ({
  inputs: [
    { name: "a", shape: [2, 4], datatype: "FP32", parameters: shm(region, 32) },
    { name: "d", shape: [2, 1], datatype: "UINT8", parameters: shm(region, 2, 200) },
    { name: "c", shape: [2, 2], datatype: "FP64", parameters: shm(region, 32, 64) },
    { name: "b", shape: [2, 4], datatype: "FP32", parameters: shm(region, 32, 128) },
  ],
});

before(async () => {
  const models = await testModels();
  writeFileSync(join(models, "shm-mixed.mjs"), mixedHandler(4, 2));
  const file = join(models, "shared-memory.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  apiKeys: [${KEY_A}, ${KEY_B}]`,
      "  sharedMemory:",
      "    enabled: true",
      `    maxRegions: ${MAX_REGIONS}`,
      `    maxRegionsPerKey: ${MAX_PER_KEY}`,
      "limits:",
      "  maxBodyBytes: 100000",
      "models:",
      "  - name: tree",
      `    path: ${join(models, "churn-tree.onnx")}`,
      "  - name: mixed",
      "    backend: custom",
      `    path: ${join(models, "shm-mixed.mjs")}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file }, { grpc: true });
  client = new (grpcService())(srv.grpc!, grpc.credentials.createInsecure());
});

after(async () => {
  client.close();
  await srv.close();
  for (const f of readdirSync(SHM)) if (f.startsWith(PREFIX)) rmSync(join(SHM, f), { force: true });
});

describe("system shared memory", () => {
  it("is announced in the server metadata, and refused with its code by a server without it", async () => {
    const meta = await call("GET", "/v2");
    assert.ok(meta.body.extensions.includes("system_shared_memory"), JSON.stringify(meta.body));
    const openapi = (await call("GET", "/openapi.json")).body;
    assert.ok(openapi.paths["/v2/systemsharedmemory/region/{region}/register"].post);
    const models = await testModels();
    const plain = await startInProcess({ modelPath: join(models, "churn-tree.onnx") });
    try {
      const m = (await (await fetch(`${plain.url}/v2`)).json()) as { extensions: string[] };
      assert.ok(!m.extensions.includes("system_shared_memory"));
      const doc = (await (await fetch(`${plain.url}/openapi.json`)).json()) as { paths: object };
      assert.ok(!("/v2/systemsharedmemory/status" in doc.paths));
      const { key } = object("plain", 64);
      const reg = await postJson(`${plain.url}/v2/systemsharedmemory/region/r/register`, {
        key,
        offset: 0,
        byte_size: 64,
      });
      assert.equal(reg.status, 400);
      assert.equal(reg.body.code, "MP_ERR_SHARED_MEMORY_DISABLED");
      const inf = await postJson(`${plain.url}/v2/models/churn-tree/infer`, {
        inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", parameters: shm("r", 24) }],
      });
      assert.equal(inf.status, 400);
      assert.equal(inf.body.code, "MP_ERR_SHARED_MEMORY_DISABLED");
    } finally {
      await plain.close();
    }
  });

  it("reads inputs from regions and writes outputs to them, answering what the JSON route answers", async () => {
    const input = mixedInputs();
    const output = object("mixed-out", 2048);
    assert.equal((await register("in", { key: input.key, offset: 0, byte_size: 256 })).status, 200);
    // The output region starts 1000 bytes into its object.
    assert.equal((await register("out", { key: output.key, offset: 1000, byte_size: 1000 })).status, 200);
    try {
      const expected = await infer("mixed", MIXED_JSON);
      assert.equal(expected.status, 200);
      const byName = Object.fromEntries(expected.body.outputs.map((o: any) => [o.name, o]));

      const res = await infer("mixed", {
        ...MIXED_SHM("in"),
        outputs: [
          { name: "sum", parameters: shm("out", 32) },
          { name: "c2", parameters: shm("out", 64, 100) },
          { name: "d" },
        ],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const [sum, c2, d] = res.body.outputs;
      assert.deepEqual(sum, {
        name: "sum",
        datatype: "FP32",
        shape: [2, 4],
        parameters: { shared_memory_region: "out", shared_memory_byte_size: 32 },
      });
      assert.deepEqual(c2.parameters, {
        shared_memory_region: "out",
        shared_memory_byte_size: 32,
        shared_memory_offset: 100,
      });
      assert.equal(c2.data, undefined);
      assert.deepEqual(d.data, byName.d.data);
      const written = readFileSync(output.file);
      const sums = Array.from({ length: 8 }, (_, i) => written.readFloatLE(1000 + i * 4));
      assert.deepEqual(sums, byName.sum.data);
      const doubled = Array.from({ length: 4 }, (_, i) => written.readDoubleLE(1100 + i * 8));
      assert.deepEqual(doubled, byName.c2.data);
      // Nothing outside the outputs' bytes was touched.
      assert.ok(written.subarray(0, 1000).every((b) => b === 0));
      assert.ok(written.subarray(1032, 1100).every((b) => b === 0));

      // A binary response: the region's outputs stay out of the body, the others come as binary.
      const bin = await fetch(`${srv.url}/v2/models/mixed/infer`, {
        method: "POST",
        headers: { ...A, "content-type": "application/json" },
        body: JSON.stringify({
          ...MIXED_SHM("in"),
          parameters: { binary_data_output: true },
          outputs: [{ name: "sum", parameters: shm("out", 32) }, { name: "d" }],
        }),
      });
      const raw = Buffer.from(await bin.arrayBuffer());
      const length = Number(bin.headers.get("inference-header-content-length"));
      const header = JSON.parse(raw.subarray(0, length).toString());
      assert.equal(header.outputs[0].parameters.shared_memory_region, "out");
      assert.deepEqual(header.outputs[1].parameters, { binary_data_size: 2 });
      assert.deepEqual([...raw.subarray(length)], byName.d.data);
    } finally {
      await unregister();
    }
  });

  it("serves an ONNX model's inputs and outputs through regions", async () => {
    const golden = JSON.parse(readFileSync(join(await testModels(), "churn-tree.golden.json"), "utf8"));
    const features: number[] = golden.inputs.features.data;
    const input = object("tree-in", f32(features));
    const output = object("tree-out", 4096);
    await register("tree-in", { key: input.key, offset: 0, byte_size: features.length * 4 });
    await register("tree-out", { key: output.key, offset: 0, byte_size: 4096 });
    try {
      const res = await infer("tree", {
        inputs: [{ name: "features", shape: [6, 6], datatype: "FP32", parameters: shm("tree-in", 144) }],
        outputs: [{ name: "probabilities", parameters: shm("tree-out", 4096) }, { name: "label" }],
      });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const out = Object.fromEntries(res.body.outputs.map((o: any) => [o.name, o]));
      assert.equal(out.probabilities.parameters.shared_memory_byte_size, 48);
      assert.equal(out.probabilities.data, undefined);
      assert.deepEqual(out.label.data, golden.outputs.label.data);
      const written = readFileSync(output.file);
      const probs = Array.from({ length: 12 }, (_, i) => written.readFloatLE(i * 4));
      for (const [i, v] of (golden.outputs.probabilities.data as number[]).entries())
        assert.ok(Math.abs(probs[i]! - v) < 1e-5, `probabilities[${i}]: ${probs[i]} against ${v}`);
    } finally {
      await unregister();
    }
  });

  it("lists, unregisters one and unregisters all of a key's regions", async () => {
    const { key } = object("list", 100);
    await register("one", { key, offset: 0, byte_size: 10 });
    await register("two", { key, offset: 10, byte_size: 90 });
    assert.deepEqual((await status()).body, [
      { name: "one", key, offset: 0, byte_size: 10 },
      { name: "two", key, offset: 10, byte_size: 90 },
    ]);
    assert.deepEqual((await status("two")).body, [{ name: "two", key, offset: 10, byte_size: 90 }]);
    assert.equal((await unregister("one")).status, 200);
    assert.deepEqual(
      (await status()).body.map((r: any) => r.name),
      ["two"],
    );
    const missing = await status("one");
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
    // Unregistering a region that is not there succeeds, as in Triton.
    assert.equal((await unregister("one")).status, 200);
    assert.equal((await unregister()).status, 200);
    assert.deepEqual((await status()).body, []);
    assert.deepEqual(openObjects(), [], "every region's file is closed once unregistered");
  });

  it("keeps each key's regions its own", async () => {
    const input = object("owned", f32([1, 2, 3, 4, 5, 6]));
    await register("mine", { key: input.key, offset: 0, byte_size: 24 });
    try {
      assert.deepEqual((await status(undefined, B)).body, []);
      const used = await infer(
        "tree",
        { inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", parameters: shm("mine", 24) }] },
        B,
      );
      assert.equal(used.status, 400);
      assert.equal(used.body.code, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
      // Another key may not register the same object, under any name.
      const taken = await register("theirs", { key: input.key, offset: 0, byte_size: 24 }, B);
      assert.equal(taken.status, 400);
      assert.equal(taken.body.code, "MP_ERR_SHARED_MEMORY_KEY");
      await unregister(undefined, B);
      assert.equal((await status("mine")).status, 200, "B's unregister-all left A's region");
      // The same region name under another key is another region.
      const other = object("other", 24);
      assert.equal((await register("mine", { key: other.key, offset: 0, byte_size: 24 }, B)).status, 200);
      assert.equal((await status("mine", B)).body[0].key, other.key);
      const unauthenticated = await call("GET", "/v2/systemsharedmemory/status", {});
      assert.equal(unauthenticated.status, 401);
    } finally {
      await unregister();
      await unregister(undefined, B);
    }
  });

  it("registers only the server's own user's objects: another user's, even one root may open, is refused", async (t) => {
    if (process.getuid?.() !== 0) return t.skip("needs root, to give an object to another user");
    const foreign = object("foreign", 64);
    // nobody's, mode 0600: the server (root) could open it, as it could another service's segments.
    chownSync(foreign.file, 65534, 65534);
    chmodSync(foreign.file, 0o600);
    const res = await register("foreign", { key: foreign.key, offset: 0, byte_size: 64 });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.code, "MP_ERR_SHARED_MEMORY_KEY");
    assert.match(res.body.error, /another user \(uid 65534\)/);
    const grpcRes = await rpc("SystemSharedMemoryRegister", {
      name: "foreign",
      key: foreign.key,
      offset: "0",
      byte_size: "64",
    });
    assert.equal(grpcRes.err?.metadata.get("mp-error-code")[0], "MP_ERR_SHARED_MEMORY_KEY");
    // So no output can be written into it either.
    const infer1 = await infer("tree", {
      inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: [1, 2, 3, 4, 5, 6] }],
      outputs: [{ name: "probabilities", parameters: shm("foreign", 64) }],
    });
    assert.equal(infer1.body.code, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
    assert.ok(
      readFileSync(foreign.file).every((b) => b === 0),
      "nothing was written to it",
    );
    assert.deepEqual((await status()).body, []);
  });

  it("registers only names under keyPrefix, modelport_ by default: other programs' segments are out of reach", async () => {
    // Named as PostgreSQL names its dynamic shared memory segments, and owned by the server's user.
    const name = `PostgreSQL.${process.pid}`;
    writeFileSync(join(SHM, name), Buffer.alloc(64));
    try {
      const res = await register("pg", { key: `/${name}`, offset: 0, byte_size: 64 });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.code, "MP_ERR_SHARED_MEMORY_KEY");
      assert.match(res.body.error, /'\/modelport_' \(server\.sharedMemory\.keyPrefix\)/);
    } finally {
      rmSync(join(SHM, name), { force: true });
    }
  });

  it("binds an object to the key that registered it while the object exists, unregistered or not", async () => {
    const secret = object("former", f32([9, 8, 7, 6, 5, 4]));
    assert.equal((await register("mine", { key: secret.key, offset: 0, byte_size: 24 })).status, 200);
    assert.equal((await unregister("mine")).status, 200);
    // A's region is gone, its object is not: B may not register it, under any name, on either port.
    const taken = await register("theirs", { key: secret.key, offset: 0, byte_size: 24 }, B);
    assert.equal(taken.status, 400, JSON.stringify(taken.body));
    assert.equal(taken.body.code, "MP_ERR_SHARED_MEMORY_KEY");
    const grpcTaken = await rpc(
      "SystemSharedMemoryRegister",
      { name: "theirs", key: secret.key, offset: "0", byte_size: "24" },
      KEY_B,
    );
    assert.equal(grpcTaken.err?.metadata.get("mp-error-code")[0], "MP_ERR_SHARED_MEMORY_KEY");
    const read = await infer(
      "tree",
      { inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", parameters: shm("theirs", 24) }] },
      B,
    );
    assert.equal(read.body.code, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
    // Its own key registers it again.
    assert.equal((await register("again", { key: secret.key, offset: 0, byte_size: 24 })).status, 200);
    await unregister();
    // Deleted and made again under the same name, it is a new object: the first key to register it has it.
    rmSync(secret.file);
    const fresh = object("former", 24);
    try {
      assert.equal((await register("theirs", { key: fresh.key, offset: 0, byte_size: 24 }, B)).status, 200);
      const back = await register("mine", { key: fresh.key, offset: 0, byte_size: 24 });
      assert.equal(back.status, 400);
      assert.equal(back.body.code, "MP_ERR_SHARED_MEMORY_KEY");
    } finally {
      await unregister(undefined, B);
    }
  });

  it("refuses bad registrations with their codes and keeps serving", async () => {
    const { key } = object("small", 64);
    const outside = join(tmpdir(), `${PREFIX}outside`);
    writeFileSync(outside, Buffer.alloc(64));
    const link = join(SHM, `${PREFIX}link`);
    rmSync(link, { force: true });
    symlinkSync(outside, link);
    const cases: [string, unknown, number, string][] = [
      ["r", { key: `/${PREFIX}missing`, offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key: `/${PREFIX}../etc/passwd`, offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key: `/../${PREFIX}small`, offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key: "/other-prefix-object", offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key: `/${PREFIX}link`, offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key: "/", offset: 0, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_KEY"],
      ["r", { key, offset: 60, byte_size: 8 }, 400, "MP_ERR_SHARED_MEMORY_RANGE"],
      ["r", { key, offset: 0, byte_size: 65 }, 400, "MP_ERR_SHARED_MEMORY_RANGE"],
      ["r", { key, offset: 0, byte_size: 0 }, 400, "MP_ERR_REQUEST_INVALID"],
      ["r", { key, offset: -1, byte_size: 8 }, 400, "MP_ERR_REQUEST_INVALID"],
      ["r", { key, offset: 0, byte_size: "8" }, 400, "MP_ERR_REQUEST_INVALID"],
      ["r", { key: 7, offset: 0, byte_size: 8 }, 400, "MP_ERR_REQUEST_INVALID"],
      ["r", [], 400, "MP_ERR_REQUEST_INVALID"],
      ["bad%20name", { key, offset: 0, byte_size: 8 }, 400, "MP_ERR_REQUEST_INVALID"],
    ];
    try {
      for (const [region, body, code, errorCode] of cases) {
        const res = await register(region, body);
        assert.equal(res.status, code, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.code, errorCode, JSON.stringify(body));
        assert.equal(typeof res.body.error, "string");
      }
      assert.equal((await register("dup", { key, offset: 0, byte_size: 8 })).status, 200);
      const dup = await register("dup", { key, offset: 8, byte_size: 8 });
      assert.equal(dup.status, 409);
      assert.equal(dup.body.code, "MP_ERR_SHARED_MEMORY_REGION_EXISTS");
      // Up to maxRegionsPerKey for one key, then 409 naming that setting until one of its own goes.
      for (let i = 1; i < MAX_PER_KEY; i++) await register(`n${i}`, { key, offset: 0, byte_size: 8 });
      const keyFull = await register("over", { key, offset: 0, byte_size: 8 });
      assert.equal(keyFull.status, 409);
      assert.equal(keyFull.body.code, "MP_ERR_SHARED_MEMORY_LIMIT");
      assert.match(keyFull.body.error, /maxRegionsPerKey/);
      // Another key still registers, up to maxRegions for all keys together.
      const theirs = object("limit-b", 64);
      for (let i = MAX_PER_KEY; i < MAX_REGIONS; i++)
        assert.equal((await register(`b${i}`, { key: theirs.key, offset: 0, byte_size: 8 }, B)).status, 200);
      const full = await register("over", { key: theirs.key, offset: 0, byte_size: 8 }, B);
      assert.equal(full.status, 409);
      assert.equal(full.body.code, "MP_ERR_SHARED_MEMORY_LIMIT");
      assert.match(full.body.error, /maxRegions\)/);
      await unregister(undefined, B);
      await unregister("n1");
      assert.equal((await register("over", { key, offset: 0, byte_size: 8 })).status, 200);
      assert.deepEqual((await status()).body.map((r: any) => r.name).sort(), [
        "dup",
        "n2",
        "n3",
        "n4",
        "over",
      ]);
    } finally {
      await unregister();
      await unregister(undefined, B);
      rmSync(link, { force: true });
      rmSync(outside, { force: true });
    }
    assert.equal((await infer("mixed", MIXED_JSON)).status, 200);
  });

  it("refuses bad references in infer requests with their codes", async () => {
    const input = mixedInputs();
    const output = object("bad-out", 16);
    await register("in", { key: input.key, offset: 0, byte_size: 256 });
    await register("out", { key: output.key, offset: 0, byte_size: 16 });
    const withInput = (i: number, parameters: unknown, extra: Record<string, unknown> = {}) => {
      const body = MIXED_SHM("in");
      body.inputs[i] = { ...body.inputs[i]!, parameters, ...extra } as (typeof body.inputs)[number];
      return body;
    };
    const cases: [string, unknown, number, string][] = [
      ["unknown region", withInput(0, shm("nope", 32)), 400, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND"],
      ["past the region", withInput(0, shm("in", 32, 240)), 400, "MP_ERR_SHARED_MEMORY_RANGE"],
      ["size against shape", withInput(0, shm("in", 28)), 400, "MP_ERR_BINARY_DATA_SIZE"],
      ["region without size", withInput(0, { shared_memory_region: "in" }), 400, "MP_ERR_REQUEST_INVALID"],
      ["size without region", withInput(0, { shared_memory_byte_size: 32 }), 400, "MP_ERR_REQUEST_INVALID"],
      ["offset alone", withInput(0, { shared_memory_offset: 4 }), 400, "MP_ERR_REQUEST_INVALID"],
      ["negative offset", withInput(0, shm("in", 32, -4)), 400, "MP_ERR_REQUEST_INVALID"],
      ["region and data", withInput(0, shm("in", 32), { data: A_VALUES }), 400, "MP_ERR_REQUEST_INVALID"],
      [
        "region and binary_data_size",
        withInput(0, { ...shm("in", 32), binary_data_size: 32 }),
        400,
        "MP_ERR_REQUEST_INVALID",
      ],
      ["wrong datatype", withInput(2, shm("in", 32, 64), { datatype: "FP32" }), 400, "MP_ERR_INPUT_DATATYPE"],
      ["more than maxBodyBytes", withInput(0, shm("in", 200_000)), 413, "MP_ERR_REQUEST_BODY_TOO_LARGE"],
      [
        "output larger than its room",
        { ...MIXED_SHM("in"), outputs: [{ name: "c2", parameters: shm("out", 16) }] },
        400,
        "MP_ERR_SHARED_MEMORY_RANGE",
      ],
      [
        "output room past the region",
        { ...MIXED_SHM("in"), outputs: [{ name: "sum", parameters: shm("out", 32, 0) }] },
        400,
        "MP_ERR_SHARED_MEMORY_RANGE",
      ],
      [
        "output region unknown",
        { ...MIXED_SHM("in"), outputs: [{ name: "sum", parameters: shm("gone", 32) }] },
        400,
        "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND",
      ],
    ];
    try {
      for (const [what, body, code, errorCode] of cases) {
        const res = await infer("mixed", body);
        assert.equal(res.status, code, `${what}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.code, errorCode, what);
      }
      assert.ok(
        readFileSync(output.file).every((b) => b === 0),
        "a refused output wrote nothing",
      );
      // The object cut short after its region was registered: the read runs out, and says so.
      truncateSync(input.file, 100);
      const cut = await infer("mixed", MIXED_SHM("in"));
      assert.equal(cut.status, 400);
      assert.equal(cut.body.code, "MP_ERR_SHARED_MEMORY_RANGE");
      assert.match(cut.body.error, /truncated/);
    } finally {
      await unregister();
    }
    assert.equal((await infer("mixed", MIXED_JSON)).status, 200);
  });

  it("lets a region go while requests use it: each answers or is refused, and its file closes", async () => {
    const input = mixedInputs();
    await register("busy", { key: input.key, offset: 0, byte_size: 256 });
    const calls = Array.from({ length: 40 }, async (_, i) => {
      if (i === 10) await unregister("busy");
      return infer("mixed", MIXED_SHM("busy"));
    });
    const answers = await Promise.all(calls);
    for (const a of answers) {
      if (a.status === 200) continue;
      assert.equal(a.status, 400, JSON.stringify(a.body));
      assert.equal(a.body.code, "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND");
    }
    assert.ok(answers.some((a) => a.status === 400));
    await unregister();
    assert.deepEqual(openObjects(), []);
  });

  it("works with Python's own shared memory and HTTP client", { skip: pythonSkip() }, async () => {
    const script = `
import json, struct, sys, urllib.request
from multiprocessing import shared_memory
url, prefix, auth = sys.argv[1], sys.argv[2], sys.argv[3]
def post(path, body=None):
    req = urllib.request.Request(url + path, method="POST", data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + auth, "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        text = r.read()
        return json.loads(text) if text else None
features = [27, 51.25, 1, 1, 0, 37, 6, 107.5, 2, 1, 0, 99]
inp = shared_memory.SharedMemory(name=prefix + "py-in", create=True, size=48)
out = shared_memory.SharedMemory(name=prefix + "py-out", create=True, size=64)
try:
    inp.buf[:48] = struct.pack("<12f", *features)
    post("/v2/systemsharedmemory/region/py_in/register", {"key": "/" + prefix + "py-in", "offset": 0, "byte_size": 48})
    post("/v2/systemsharedmemory/region/py_out/register", {"key": "/" + prefix + "py-out", "offset": 0, "byte_size": 64})
    res = post("/v2/models/tree/infer", {
        "inputs": [{"name": "features", "shape": [2, 6], "datatype": "FP32",
                    "parameters": {"shared_memory_region": "py_in", "shared_memory_byte_size": 48}}],
        "outputs": [{"name": "probabilities", "parameters": {"shared_memory_region": "py_out", "shared_memory_byte_size": 64}}],
    })
    size = res["outputs"][0]["parameters"]["shared_memory_byte_size"]
    print(json.dumps({"size": size, "probabilities": list(struct.unpack("<%df" % (size // 4), bytes(out.buf[:size])))}))
    post("/v2/systemsharedmemory/unregister")
finally:
    inp.close(); inp.unlink(); out.close(); out.unlink()
`;
    // Asynchronously: the server answering it runs in this process.
    const ran = await promisify(execFile)(PYTHON, ["-c", script, srv.url, PREFIX, KEY_A]);
    const got = JSON.parse(ran.stdout) as { size: number; probabilities: number[] };
    assert.equal(got.size, 16);
    assert.deepEqual(got.probabilities, await pythonTreeProbabilities());
  });
});

describe("system shared memory over gRPC", () => {
  it("registers, infers with regions and raw contents mixed, and answers what HTTP answers", async () => {
    const meta = await rpc("ServerMetadata", {});
    assert.ok(meta.res.extensions.includes("system_shared_memory"));
    const input = mixedInputs();
    const output = object("grpc-out", 256);
    const reg = await rpc("SystemSharedMemoryRegister", {
      name: "g-in",
      key: input.key,
      offset: "0",
      byte_size: "256",
    });
    assert.equal(reg.err, null, reg.err?.details);
    await rpc("SystemSharedMemoryRegister", {
      name: "g-out",
      key: output.key,
      offset: "0",
      byte_size: "256",
    });
    try {
      const st = await rpc("SystemSharedMemoryStatus", { name: "" });
      assert.deepEqual(Object.keys(st.res.regions).sort(), ["g-in", "g-out"]);
      assert.equal(st.res.regions["g-in"].key, input.key);
      assert.equal(String(st.res.regions["g-in"].byte_size), "256");
      // One registry for both ports: the same key sees them over HTTP.
      assert.deepEqual((await status("g-out")).body, [
        { name: "g-out", key: output.key, offset: 0, byte_size: 256 },
      ]);
      // a and c from the region; d and b raw, in the order of inputs (Triton skips region inputs in raw_input_contents).
      const res = await rpc("ModelInfer", {
        model_name: "mixed",
        inputs: [
          { name: "a", datatype: "FP32", shape: [2, 4], parameters: grpcShm("g-in", 32) },
          { name: "d", datatype: "UINT8", shape: [2, 1] },
          { name: "c", datatype: "FP64", shape: [2, 2], parameters: grpcShm("g-in", 32, 64) },
          { name: "b", datatype: "FP32", shape: [2, 4] },
        ],
        outputs: [{ name: "sum", parameters: grpcShm("g-out", 64, 16) }, { name: "c2" }, { name: "d" }],
        raw_input_contents: [Buffer.from(D_VALUES), f32(B_VALUES)],
      });
      assert.equal(res.err, null, res.err?.details);
      const expected = await infer("mixed", MIXED_JSON);
      const byName = Object.fromEntries(expected.body.outputs.map((o: any) => [o.name, o]));
      const [sum, c2, d] = res.res.outputs;
      assert.equal(sum.name, "sum");
      assert.equal(sum.parameters.shared_memory_region.string_param, "g-out");
      assert.equal(String(sum.parameters.shared_memory_byte_size.int64_param), "32");
      assert.equal(String(sum.parameters.shared_memory_offset.int64_param), "16");
      assert.equal(res.res.raw_output_contents[0].length, 0, "a region's output has an empty raw entry");
      const written = readFileSync(output.file);
      assert.deepEqual(
        Array.from({ length: 8 }, (_, i) => written.readFloatLE(16 + i * 4)),
        byName.sum.data,
      );
      const raw = res.res.raw_output_contents as Buffer[];
      assert.equal(c2.name, "c2");
      assert.deepEqual(
        Array.from({ length: 4 }, (_, i) => raw[1]!.readDoubleLE(i * 8)),
        byName.c2.data,
      );
      assert.equal(d.name, "d");
      assert.deepEqual([...raw[2]!], byName.d.data);
    } finally {
      await rpc("SystemSharedMemoryUnregister", { name: "" });
    }
    assert.deepEqual((await rpc("SystemSharedMemoryStatus", { name: "" })).res.regions, {});
  });

  it("answers bad registrations and references with their codes", async () => {
    const input = mixedInputs();
    const code = (a: { err: grpc.ServiceError | null }) => [
      a.err?.code,
      a.err?.metadata.get("mp-error-code")[0],
    ];
    assert.deepEqual(
      code(
        await rpc("SystemSharedMemoryRegister", {
          name: "x",
          key: "/../etc/passwd",
          offset: "0",
          byte_size: "8",
        }),
      ),
      [grpc.status.INVALID_ARGUMENT, "MP_ERR_SHARED_MEMORY_KEY"],
    );
    assert.deepEqual(
      code(
        await rpc("SystemSharedMemoryRegister", {
          name: "x",
          key: input.key,
          offset: "0",
          byte_size: "99999999999999999999",
        }),
      ),
      [grpc.status.INVALID_ARGUMENT, "MP_ERR_REQUEST_INVALID"],
    );
    await rpc("SystemSharedMemoryRegister", { name: "x", key: input.key, offset: "0", byte_size: "256" });
    try {
      assert.deepEqual(
        code(
          await rpc("SystemSharedMemoryRegister", { name: "x", key: input.key, offset: "0", byte_size: "8" }),
        ),
        [grpc.status.ALREADY_EXISTS, "MP_ERR_SHARED_MEMORY_REGION_EXISTS"],
      );
      assert.deepEqual(code(await rpc("SystemSharedMemoryStatus", { name: "x" }, KEY_B)), [
        grpc.status.INVALID_ARGUMENT,
        "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND",
      ]);
      const inputs = [
        { name: "a", datatype: "FP32", shape: [2, 4], parameters: grpcShm("x", 32) },
        { name: "d", datatype: "UINT8", shape: [2, 1], parameters: grpcShm("x", 2, 200) },
        { name: "c", datatype: "FP64", shape: [2, 2], parameters: grpcShm("x", 32, 64) },
        { name: "b", datatype: "FP32", shape: [2, 4], parameters: grpcShm("x", 32, 128) },
      ];
      assert.equal((await rpc("ModelInfer", { model_name: "mixed", inputs })).err, null);
      const extraRaw = await rpc("ModelInfer", {
        model_name: "mixed",
        inputs,
        raw_input_contents: [Buffer.alloc(8)],
      });
      assert.deepEqual(code(extraRaw), [grpc.status.INVALID_ARGUMENT, "MP_ERR_REQUEST_INVALID"]);
      const otherKey = await rpc("ModelInfer", { model_name: "mixed", inputs }, KEY_B);
      assert.deepEqual(code(otherKey), [
        grpc.status.INVALID_ARGUMENT,
        "MP_ERR_SHARED_MEMORY_REGION_NOT_FOUND",
      ]);
      const tooSmall = await rpc("ModelInfer", {
        model_name: "mixed",
        inputs,
        outputs: [{ name: "sum", parameters: grpcShm("x", 8) }],
      });
      assert.deepEqual(code(tooSmall), [grpc.status.INVALID_ARGUMENT, "MP_ERR_SHARED_MEMORY_RANGE"]);
      const badSize = await rpc("ModelInfer", {
        model_name: "mixed",
        inputs: [
          {
            ...inputs[0]!,
            parameters: {
              shared_memory_region: { string_param: "x" },
              shared_memory_byte_size: { bool_param: true },
            },
          },
          ...inputs.slice(1),
        ],
      });
      assert.deepEqual(code(badSize), [grpc.status.INVALID_ARGUMENT, "MP_ERR_REQUEST_INVALID"]);
    } finally {
      await rpc("SystemSharedMemoryUnregister", { name: "" });
    }
  });

  it("works with Python grpcio stubs generated from the same .proto, as Triton's client calls it", {
    skip: grpcPythonSkip(),
  }, async () => {
    const out = pythonGrpcStubs();
    const script = `import json, struct, sys
import grpc
from multiprocessing import shared_memory
import inference_pb2 as pb, inference_pb2_grpc as rpc
target, prefix, key = sys.argv[1:4]
stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel(target))
auth = [("authorization", "Bearer " + key)]
features = [27, 51.25, 1, 1, 0, 37, 6, 107.5, 2, 1, 0, 99]
inp = shared_memory.SharedMemory(name=prefix + "gpy-in", create=True, size=48)
out = shared_memory.SharedMemory(name=prefix + "gpy-out", create=True, size=64)
try:
    inp.buf[:48] = struct.pack("<12f", *features)
    stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="gpy_in", key="/" + prefix + "gpy-in", offset=0, byte_size=48), metadata=auth)
    stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="gpy_out", key="/" + prefix + "gpy-out", offset=0, byte_size=64), metadata=auth)
    req = pb.ModelInferRequest(model_name="tree")
    t = req.inputs.add(); t.name = "features"; t.datatype = "FP32"; t.shape.extend([2, 6])
    t.parameters["shared_memory_region"].string_param = "gpy_in"
    t.parameters["shared_memory_byte_size"].int64_param = 48
    o = req.outputs.add(); o.name = "probabilities"
    o.parameters["shared_memory_region"].string_param = "gpy_out"
    o.parameters["shared_memory_byte_size"].int64_param = 64
    res = stub.ModelInfer(req, metadata=auth, timeout=30)
    size = res.outputs[0].parameters["shared_memory_byte_size"].int64_param
    status = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), metadata=auth)
    print(json.dumps({"size": size, "regions": sorted(status.regions.keys()),
                      "probabilities": list(struct.unpack("<%df" % (size // 4), bytes(out.buf[:size])))}))
    stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(), metadata=auth)
finally:
    inp.close(); inp.unlink(); out.close(); out.unlink()
`;
    writeFileSync(join(out, "client.py"), script);
    // Asynchronously: the server answering it runs in this process.
    const ran = await promisify(execFile)(PYTHON, [join(out, "client.py"), srv.grpc!, PREFIX, KEY_A], {
      cwd: out,
    });
    const got = JSON.parse(ran.stdout) as { size: number; regions: string[]; probabilities: number[] };
    assert.equal(got.size, 16);
    assert.deepEqual(got.regions, ["gpy_in", "gpy_out"]);
    assert.deepEqual(got.probabilities, await pythonTreeProbabilities());
    rmSync(out, { recursive: true, force: true });
  });
});

/** An IPv4 address of this host other than loopback, to call the server from; undefined if it has none. */
function outsideAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces()))
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return undefined;
}

describe("system shared memory on a server without keys", () => {
  it("answers only loopback callers, on HTTP and gRPC: others get 403 for registry calls and infers naming regions", async (t) => {
    const outside = outsideAddress();
    if (outside === undefined) return t.skip("this host has no address but loopback to call from");
    const models = await testModels();
    const open = await startInProcess(
      {
        modelPath: join(models, "churn-tree.onnx"),
        flags: { sharedMemory: true },
        env: {},
      },
      { grpc: true, host: "0.0.0.0" },
    );
    const port = Number(new URL(open.url).port);
    const grpcPort = open.grpc!.split(":").pop()!;
    const clients = ["127.0.0.1", outside].map(
      (host) => new (grpcService())(`${host}:${grpcPort}`, grpc.credentials.createInsecure()),
    );
    const grpcCall = (c: grpc.Client & Record<string, any>, method: string, request: unknown) =>
      new Promise<{ err: grpc.ServiceError | null }>((resolve) =>
        c[method](request, new grpc.Metadata(), (err: grpc.ServiceError | null) => resolve({ err })),
      );
    const input = object("open-in", f32([27, 51.25, 1, 1, 0, 37]));
    const local = `http://127.0.0.1:${port}`;
    const remote = `http://${outside}:${port}`;
    const viaShm = {
      inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", parameters: shm("in", 24) }],
    };
    try {
      const reg = await postJson(`${local}/v2/systemsharedmemory/region/in/register`, {
        key: input.key,
        offset: 0,
        byte_size: 24,
      });
      assert.equal(reg.status, 200, JSON.stringify(reg.body));
      assert.equal((await postJson(`${local}/v2/models/churn-tree/infer`, viaShm)).status, 200);
      const refused = [
        await postJson(`${remote}/v2/systemsharedmemory/region/in2/register`, {
          key: input.key,
          offset: 0,
          byte_size: 24,
        }),
        await postJson(`${remote}/v2/models/churn-tree/infer`, viaShm),
        await postJson(`${remote}/v2/models/churn-tree/infer`, {
          inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: [1, 2, 3, 4, 5, 6] }],
          outputs: [{ name: "probabilities", parameters: shm("in", 24) }],
        }),
        await postJson(`${remote}/v2/systemsharedmemory/unregister`, ""),
        await fetch(`${remote}/v2/systemsharedmemory/status`).then(async (r) => ({
          status: r.status,
          body: (await r.json()) as any,
        })),
      ];
      for (const r of refused) {
        assert.equal(r.status, 403, JSON.stringify(r.body));
        assert.equal(r.body.code, "MP_ERR_SHARED_MEMORY_REMOTE");
      }
      // The region is still there, and a remote infer without regions is answered.
      assert.equal((await postJson(`${local}/v2/models/churn-tree/infer`, viaShm)).status, 200);
      const plain = await postJson(`${remote}/v2/models/churn-tree/infer`, {
        inputs: [{ name: "features", shape: [1, 6], datatype: "FP32", data: [1, 2, 3, 4, 5, 6] }],
      });
      assert.equal(plain.status, 200);

      const grpcRequests: [string, unknown][] = [
        ["SystemSharedMemoryRegister", { name: "g", key: input.key, offset: "0", byte_size: "24" }],
        ["SystemSharedMemoryStatus", { name: "" }],
        [
          "ModelInfer",
          {
            model_name: "churn-tree",
            inputs: [{ name: "features", datatype: "FP32", shape: [1, 6], parameters: grpcShm("in", 24) }],
          },
        ],
      ];
      for (const [method, request] of grpcRequests) {
        const far = await grpcCall(clients[1]!, method, request);
        assert.equal(far.err?.code, grpc.status.PERMISSION_DENIED, `${method}: ${far.err?.details}`);
        assert.equal(far.err?.metadata.get("mp-error-code")[0], "MP_ERR_SHARED_MEMORY_REMOTE");
        const near = await grpcCall(clients[0]!, method, request);
        assert.equal(near.err, null, `${method} over loopback: ${near.err?.details}`);
      }
    } finally {
      for (const c of clients) c.close();
      await open.close();
    }
  });
});

function pythonSkip(): string | false {
  return existsSync(PYTHON) ? false : `${PYTHON} is not installed`;
}

/**
 * The tree's probabilities for the Python clients' two rows (features 27, 51.25, … 99), as the JSON
 * route answers them and as Python reads FP32 values back: widened to doubles.
 */
async function pythonTreeProbabilities(): Promise<number[]> {
  const data = [27, 51.25, 1, 1, 0, 37, 6, 107.5, 2, 1, 0, 99];
  const res = await infer("tree", {
    inputs: [{ name: "features", shape: [2, 6], datatype: "FP32", data }],
    outputs: [{ name: "probabilities" }],
  });
  return (res.body.outputs[0].data as number[]).map(Math.fround);
}
