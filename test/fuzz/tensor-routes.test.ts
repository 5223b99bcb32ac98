// Fuzzes the tensor routes of a real `modelport serve` process: native predict (rows, named
// tensors, raw octet-stream with X-Tensor-Shape) and Open Inference Protocol infer (JSON and
// the binary tensor extension). Every answer is a 2xx or a 4xx with an MP_ERR_* code in the
// route's wire shape; valid inputs get one output row per input row.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import {
  edgeNumber,
  edgeString,
  encode,
  type Json,
  multiInputs,
  mutated,
  mutatedText,
  nativeBody,
  oipBody,
  rows,
  WIDTHS,
} from "./arbitraries.js";
import { check, checkAnswer, postJson, SHM_PREFIX, send, styleOf, useFuzzServer } from "./harness.js";

const MODELS = [
  "tree",
  "mlp",
  "multi",
  "wide",
  "nope",
  "tree%00",
  "../tree",
  "%F0%9F%A6%80",
  "%F0%9F%A6",
  "t".repeat(101),
];

async function warm(url: string): Promise<void> {
  await postJson(url, "/v1/models/tree/predict", { rows: [[1, 2, 3, 4, 5, 6]] });
  await postJson(url, "/v1/models/multi/predict", {
    inputs: { a: [[1, 2, 3]], b: [[1, 2, 3]], ids: [1], mask: [true], pixels: [[1, 2, 3, 4]], scale: 1 },
  });
  await postJson(url, "/v2/models/mlp/infer", {
    inputs: [{ name: "features", datatype: "FP32", shape: [1, 4], data: [1, 2, 3, 4] }],
  });
  await postJson(url, "/v1/models/ragged/predict", { rows: [[1, 2]] });
  await send(url, "POST", "/v1/models/tree/predict", {
    headers: { "content-type": "application/octet-stream", "x-tensor-shape": "1,6" },
    body: new Uint8Array(24),
  });
}

const server = useFuzzServer({ warm });

/** The model a mutated request goes to: usually the one its body was made for. */
const target = (model: string) =>
  fc.oneof({ arbitrary: fc.constant(model), weight: 9 }, fc.constantFrom(...MODELS));

describe("native predict", () => {
  it("mutated JSON bodies (rows and named tensors) get 2xx or a coded 4xx", () =>
    check(
      "nativeRows",
      fc.asyncProperty(
        nativeBody.chain(({ model, body }) => fc.tuple(target(model), mutated(fc.constant(body)))),
        async ([model, body]) => {
          const res = await postJson(server.url, `/v1/models/${model}/predict`, body);
          checkAnswer(res, styleOf(`/v1/models/${model}/predict`), {
            what: `${model} ${encode(body).slice(0, 300)}`,
          });
        },
      ),
    ));

  it("mutated JSON text (NaN, truncation, garbage, empty) gets a coded 4xx or a 2xx", () =>
    check(
      "nativeInputs",
      fc.asyncProperty(
        nativeBody.chain(({ model, body }) => fc.tuple(fc.constant(model), mutatedText(fc.constant(body)))),
        async ([model, text]) => {
          const res = await postJson(server.url, `/v1/models/${model}/predict`, text);
          checkAnswer(res, "native", { what: `${model} ${text.slice(0, 300)}` });
        },
      ),
    ));

  it("raw octet-stream bodies with any X-Tensor-Shape and datatype get 2xx or a coded 4xx", () =>
    check(
      "nativeRaw",
      fc.asyncProperty(
        fc.record({
          model: fc.constantFrom("tree", "mlp", "wide", "multi"),
          rowsN: fc.integer({ min: 0, max: 5 }),
          extra: fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, fc.integer({ min: -7, max: 7 })),
          shape: fc.option(
            fc.oneof(
              fc.constantFrom(
                "",
                "1,6",
                "2,4",
                "1,32",
                "-1,6",
                "1.5,6",
                "0,6",
                "99999999999999999999,6",
                "6",
                "1,,6",
                " 1 , 6 ",
                "1,6,1",
                "é",
              ),
              fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 4 }).map((d) => d.join(",")),
              fc.string({ unit: "grapheme-ascii", maxLength: 12 }),
            ),
            { nil: undefined },
          ),
          datatype: fc.option(fc.constantFrom("FP32", "FP64", "INT64", "BYTES", "fp32", "", "X"), {
            nil: undefined,
          }),
          accept: fc.option(
            fc.constantFrom(
              "application/octet-stream",
              "application/json;q=0.1, application/octet-stream",
              "*/*",
              "garbage;;q=x",
            ),
            { nil: undefined },
          ),
          outputs: fc.option(fc.constantFrom("label", "probabilities", "label,probabilities", "nope", ","), {
            nil: undefined,
          }),
          fill: fc.uint8Array({ maxLength: 8 }),
        }),
        async (c) => {
          const width = WIDTHS[c.model as keyof typeof WIDTHS] ?? 3;
          const length = Math.max(0, c.rowsN * width * 4 + c.extra);
          const body = new Uint8Array(length);
          for (let i = 0; i < length; i++) body[i] = c.fill[i % Math.max(1, c.fill.length)] ?? 0;
          const headers: Record<string, string> = { "content-type": "application/octet-stream" };
          if (c.shape !== undefined) headers["x-tensor-shape"] = c.shape;
          if (c.datatype !== undefined) headers["x-tensor-datatype"] = c.datatype;
          if (c.accept !== undefined) headers.accept = c.accept;
          const query = c.outputs === undefined ? "" : `?outputs=${encodeURIComponent(c.outputs)}`;
          const res = await send(server.url, "POST", `/v1/models/${c.model}/predict${query}`, {
            headers,
            body,
          });
          checkAnswer(res, "native", { what: JSON.stringify({ ...c, length }) });
        },
      ),
    ));

  it("valid inputs get 200 with one output row per input row, also when sent together", () =>
    check(
      "nativeValid",
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            fc
              .tuple(fc.constantFrom("tree", "mlp", "wide"), fc.integer({ min: 1, max: 5 }))
              .chain(([model, n]) =>
                rows(WIDTHS[model as keyof typeof WIDTHS], n).map((r) => ({
                  model,
                  n: r.length,
                  body: { rows: r } as Json,
                })),
              ),
            fc
              .integer({ min: 1, max: 3 })
              .chain((n) =>
                multiInputs(n).map((inputs) => ({ model: "multi", n, body: { inputs } as Json })),
              ),
          ),
          { minLength: 1, maxLength: 4 },
        ),
        async (batch) => {
          const answers = await Promise.all(
            batch.map((b) => postJson(server.url, `/v1/models/${b.model}/predict`, b.body)),
          );
          answers.forEach((res, i) => {
            const b = batch[i]!;
            assert.equal(
              res.status,
              200,
              `${b.model} ${encode(b.body).slice(0, 200)} → ${res.text.slice(0, 300)}`,
            );
            const outputs = (res.json as { outputs: Record<string, unknown[]> }).outputs;
            for (const [name, value] of Object.entries(outputs))
              assert.equal(
                value.length,
                b.n,
                `${b.model} output ${name} has ${value.length} rows for ${b.n}`,
              );
          });
        },
      ),
    ));
});

describe("batching", () => {
  it("concurrent requests to a [batch, seq] model each get exactly their own answer (y = x + x)", () =>
    check(
      "raggedBatch",
      fc.asyncProperty(
        fc.array(
          fc.record({
            width: fc.integer({ min: 1, max: 8 }),
            rows: fc.integer({ min: 1, max: 3 }),
            seed: fc.integer({ min: -1000, max: 1000 }),
          }),
          { minLength: 2, maxLength: 5 },
        ),
        // Mixed widths in one burst: the batcher joins only requests of the same trailing dims
        // (it once joined them at the first one's width, crashing the process or answering a
        // request with another's numbers).
        async (burst) => {
          const requests = burst.map((r, i) =>
            Array.from({ length: r.rows }, (_, row) =>
              Array.from({ length: r.width }, (_, c) => r.seed + i * 100 + row * 10 + c),
            ),
          );
          const answers = await Promise.all(
            requests.map((rows) => postJson(server.url, "/v1/models/ragged/predict", { rows })),
          );
          answers.forEach((res, i) => {
            assert.equal(res.status, 200, res.text.slice(0, 300));
            const want = requests[i]!.map((row) => row.map((v) => v * 2));
            assert.deepEqual(
              (res.json as { outputs: { y: number[][] } }).outputs.y,
              want,
              `request ${i} got another's answer`,
            );
          });
        },
      ),
    ));
});

describe("Open Inference Protocol infer", () => {
  it("mutated JSON bodies and text get 2xx or a coded 4xx in the OIP shape", () =>
    check(
      "oipJson",
      fc.asyncProperty(
        oipBody.chain(({ model, body }) =>
          fc.tuple(
            target(model),
            fc.oneof(mutated(fc.constant(body)), mutatedText(fc.constant(body))),
            fc.constantFrom("", "/versions/1", "/versions/2", "/versions/%00"),
          ),
        ),
        async ([model, body, version]) => {
          const res = await postJson(server.url, `/v2/models/${model}${version}/infer`, body);
          const path = `/v2/models/${model}${version}/infer`;
          checkAnswer(res, styleOf(path), { what: `${model}${version} ${encode(body).slice(0, 300)}` });
        },
      ),
    ));

  it("binary tensor bodies with wrong header lengths, sizes, datatypes and bytes get 2xx or a coded 4xx", () =>
    check(
      "oipBinary",
      fc.asyncProperty(
        oipBody.chain(({ model, body }) =>
          fc.tuple(
            fc.constant(model),
            fc.constant(body),
            fc.record({
              binaryMask: fc.nat(),
              headerDelta: fc.oneof(
                { arbitrary: fc.constant(0), weight: 4 },
                fc.integer({ min: -20, max: 20 }),
              ),
              headerText: fc.option(
                fc.constantFrom("", "0", "-1", "abc", "1e3", "99999999999999999999", " 5 ", "5,5"),
                {
                  nil: undefined,
                },
              ),
              sizeDelta: fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, fc.integer({ min: -9, max: 9 })),
              sizeValue: fc.option(
                fc.oneof(edgeNumber, edgeString, fc.constant(null)) as fc.Arbitrary<Json>,
                {
                  nil: undefined,
                },
              ),
              trailing: fc.oneof(
                { arbitrary: fc.constant(new Uint8Array(0)), weight: 4 },
                fc.uint8Array({ maxLength: 9 }),
              ),
              cut: fc.oneof({ arbitrary: fc.constant(0), weight: 4 }, fc.integer({ min: 1, max: 30 })),
              datatype: fc.option(
                fc.constantFrom("FP32", "FP64", "INT64", "BOOL", "UINT8", "BYTES", "FP16", "INT8"),
                {
                  nil: undefined,
                },
              ),
              randomBytes: fc.boolean(),
              contentType: fc.constantFrom(
                "application/octet-stream",
                "application/json",
                undefined,
                "text/plain",
              ),
              binaryOut: fc.constantFrom(undefined, true, false, "yes"),
            }),
          ),
        ),
        async ([model, body, c]) => {
          const { header, bytes } = binaryRequest(body as unknown as { inputs: OipInput[] }, c);
          const headerText = JSON.stringify(header);
          const headerBytes = Buffer.from(headerText);
          let full = Buffer.concat([headerBytes, bytes, Buffer.from(c.trailing)]);
          if (c.cut) full = full.subarray(0, Math.max(0, full.length - c.cut));
          const headers: Record<string, string> = {
            "inference-header-content-length": c.headerText ?? String(headerBytes.length + c.headerDelta),
          };
          if (c.contentType) headers["content-type"] = c.contentType;
          const res = await send(server.url, "POST", `/v2/models/${model}/infer`, { headers, body: full });
          checkAnswer(res, "oip", { what: `${model} ${headerText.slice(0, 300)} ${JSON.stringify(c)}` });
        },
      ),
    ));
});

describe("Open Inference Protocol shared memory", () => {
  // Two registered regions over objects of this process: inputs are read from `in` (random bytes,
  // so any datatype may come out of them), outputs written to `out`.
  const objects = ["in", "out", "spare"].map((n) => `${SHM_PREFIX}${process.pid}-${n}`);
  const REGION_BYTES = 65_536;
  before(async () => {
    for (const o of objects)
      writeFileSync(
        join("/dev/shm", o),
        Buffer.from(Array.from({ length: REGION_BYTES }, (_, i) => (i * 131) & 0xff)),
      );
    for (const [name, o] of [
      ["in", objects[0]],
      ["out", objects[1]],
    ] as const) {
      const res = await postJson(server.url, `/v2/systemsharedmemory/region/${name}/register`, {
        key: `/${o}`,
        offset: 0,
        byte_size: REGION_BYTES,
      });
      assert.equal(res.status, 200, res.text);
    }
  });
  after(() => {
    for (const o of objects) rmSync(join("/dev/shm", o), { force: true });
  });

  const reference = fc.record({
    region: fc.oneof(
      { arbitrary: fc.constantFrom("in", "out"), weight: 6 },
      fc.constantFrom("nope", "", "IN", "in/../out") as fc.Arbitrary<Json>,
      edgeNumber as fc.Arbitrary<Json>,
      fc.constant(null),
    ),
    sizeDelta: fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, fc.integer({ min: -9, max: 9 })),
    size: fc.option(fc.oneof(edgeNumber, edgeString) as fc.Arbitrary<Json>, { nil: undefined }),
    offset: fc.option(
      fc.oneof(fc.nat({ max: REGION_BYTES + 10 }), edgeNumber, edgeString) as fc.Arbitrary<Json>,
      { nil: undefined },
    ),
    drop: fc.constantFrom(undefined, "region", "size"),
  });

  /** Shared memory parameters for a tensor of `bytes` bytes, as the case bends them. */
  function shmParameters(bytes: number, r: typeof reference extends fc.Arbitrary<infer T> ? T : never) {
    const p: Record<string, Json> = {};
    if (r.drop !== "region") p.shared_memory_region = r.region;
    if (r.drop !== "size") p.shared_memory_byte_size = r.size ?? bytes + r.sizeDelta;
    if (r.offset !== undefined) p.shared_memory_offset = r.offset;
    return p;
  }

  it("inputs and outputs by region, with wrong names, sizes and offsets, get 2xx or a coded 4xx", () =>
    check(
      "oipShm",
      fc.asyncProperty(
        oipBody.chain(({ model, body }) =>
          fc.tuple(
            target(model),
            fc.constant(body),
            fc.nat(),
            fc.array(reference, { minLength: 1, maxLength: 5 }),
            fc.option(fc.tuple(fc.constantFrom("label", "probabilities", "output", "y"), reference), {
              nil: undefined,
            }),
            fc.oneof(
              { arbitrary: fc.constant(undefined), weight: 8 },
              fc.record({
                name: fc.oneof(fc.constantFrom("f1", "in", "a/b", "%00", "x".repeat(200)), edgeString),
                key: fc.oneof(
                  fc.constantFrom(`/${objects[2]}`, `/${objects[0]}`, "/", "/..", "/etc/passwd", "../x"),
                  edgeString,
                ) as fc.Arbitrary<Json>,
                offset: fc.oneof(fc.nat({ max: REGION_BYTES + 10 }), edgeNumber) as fc.Arbitrary<Json>,
                byteSize: fc.oneof(
                  fc.nat({ max: REGION_BYTES + 10 }),
                  edgeNumber,
                  edgeString,
                ) as fc.Arbitrary<Json>,
              }),
            ),
          ),
        ),
        async ([model, body, mask, refs, output, registration]) => {
          const inputs = (body as unknown as { inputs: OipInput[] }).inputs.map((inp, i) => {
            if (!((mask >> i) & 1) && i !== 0) return inp as unknown as Json;
            const r = refs[i % refs.length]!;
            const size = inp.data.length * (inp.datatype === "FP64" || inp.datatype === "INT64" ? 8 : 4);
            return {
              name: inp.name,
              shape: inp.shape,
              datatype: inp.datatype,
              parameters: shmParameters(size, r),
            };
          });
          const request: Record<string, Json> = { inputs };
          if (output) request.outputs = [{ name: output[0], parameters: shmParameters(64, output[1]) }];
          const path = `/v2/models/${model}/infer`;
          const res = await postJson(server.url, path, request);
          checkAnswer(res, styleOf(path), { what: `${model} ${encode(request).slice(0, 400)}` });
          if (!registration) return;
          let name: string;
          try {
            name = encodeURIComponent(String(registration.name));
          } catch {
            // A lone surrogate: sent as the bytes UTF-8 would give it, which no decoder accepts.
            name = "%ED%A0%80";
          }
          const reg = await postJson(server.url, `/v2/systemsharedmemory/region/${name}/register`, {
            key: registration.key,
            offset: registration.offset,
            byte_size: registration.byteSize,
          });
          checkAnswer(reg, "oip", { what: `register ${name} ${encode(registration as unknown as Json)}` });
          const status = await send(server.url, "GET", `/v2/systemsharedmemory/region/${name}/status`);
          checkAnswer(status, "oip", { what: `status ${name}` });
          // Never the two regions every case uses.
          if (name !== "in" && name !== "out") {
            const gone = await send(server.url, "POST", `/v2/systemsharedmemory/region/${name}/unregister`);
            checkAnswer(gone, "oip", { what: `unregister ${name}` });
          }
        },
      ),
    ));
});

interface OipInput {
  name: string;
  datatype: string;
  shape: number[];
  data: (number | boolean)[];
  parameters?: Record<string, Json>;
}

/** Bytes of `data` as `datatype` (little-endian), or random bytes of the same length. */
function toBytes(datatype: string, data: (number | boolean)[], random: boolean): Buffer {
  const n = data.length;
  let out: Buffer;
  switch (datatype) {
    case "FP64":
      out = Buffer.from(new Float64Array(data.map(Number)).buffer);
      break;
    case "INT64":
      out = Buffer.from(new BigInt64Array(data.map((v) => BigInt(Math.trunc(Number(v))))).buffer);
      break;
    case "BOOL":
    case "UINT8":
      out = Buffer.from(new Uint8Array(data.map(Number)).buffer);
      break;
    default:
      out = Buffer.from(new Float32Array(data.map(Number)).buffer);
  }
  if (random) for (let i = 0; i < out.length; i++) out[i] = (i * 131 + n * 7) & 0xff;
  return out;
}

/** Turns some inputs of a valid OIP body into binary ones and applies the case's mutations. */
function binaryRequest(
  body: { inputs: OipInput[] },
  c: {
    binaryMask: number;
    sizeDelta: number;
    sizeValue?: Json;
    datatype?: string;
    randomBytes: boolean;
    binaryOut: unknown;
  },
): { header: Json; bytes: Buffer } {
  const chunks: Buffer[] = [];
  const inputs = body.inputs.map((inp, i) => {
    if (!((c.binaryMask >> i) & 1) && i !== 0) return inp as unknown as Json;
    const bytes = toBytes(inp.datatype, inp.data, c.randomBytes);
    chunks.push(bytes);
    const size =
      i === 0 && c.sizeValue !== undefined ? c.sizeValue : bytes.length + (i === 0 ? c.sizeDelta : 0);
    return {
      name: inp.name,
      shape: inp.shape,
      datatype: i === 0 && c.datatype ? c.datatype : inp.datatype,
      parameters: { binary_data_size: size },
    } as Json;
  });
  const header: Record<string, Json> = { inputs };
  if (c.binaryOut !== undefined) header.parameters = { binary_data_output: c.binaryOut as Json };
  return { header, bytes: Buffer.concat(chunks) };
}

server.finalCheck();
