// Fuzzes ModelInfer on the gRPC port of a real `modelport serve` process, spoken to by
// @grpc/grpc-js with src/grpc/inference.proto loaded as it ships: messages built from hostile parts
// (model names, datatypes, shapes past every limit, raw entries of any length at any offset, typed
// contents, requested outputs), bytes that are no message at all, and valid requests of every
// input order and size, whose raw entries lie at every offset of the message (the server moves
// misaligned ones within it: src/protocol/align-in-place.ts); and tensors through shared memory
// regions registered over gRPC, with their parameters right or bent, beside registrations of any
// name, key and range. Every call ends OK or with the gRPC
// code its MP_ERR_* code maps to, a client's fault (never INTERNAL or UNKNOWN), the code first in
// the details and again in `mp-error-code`; every valid request gets exactly the outputs
// computed here.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { checkGrpcResult, type GrpcResult, grpcClient } from "./grpc-client.js";
import { check, postJson, SHM_PREFIX, useFuzzServer } from "./harness.js";

async function warm(url: string): Promise<void> {
  await postJson(url, "/v2/models/multi/infer", {
    inputs: [
      { name: "a", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] },
      { name: "b", datatype: "FP64", shape: [1, 3], data: [1, 2, 3] },
      { name: "ids", datatype: "INT64", shape: [1], data: [1] },
      { name: "mask", datatype: "BOOL", shape: [1], data: [true] },
      { name: "pixels", datatype: "UINT8", shape: [1, 4], data: [1, 2, 3, 4] },
      { name: "scale", datatype: "FP32", shape: [], data: [1] },
    ],
  });
}

// multi-io again, taking requests of up to 4,096 rows (the suite's limit is 64): its raw entries
// then pass 16 KiB, the size from which the server makes them views of the message.
const ROWS_MAX = 3000;
const server = useFuzzServer({
  warm,
  grpc: true,
  extra: (models) => [
    `  - {name: multi4k, path: ${join(models, "multi-io.onnx")}, threads: 1, limits: {maxBatchRows: 4096}}`,
  ],
});

const { client, unary, inferBytes } = grpcClient(() => server.grpc);
/** ModelInfer with a message object, or with bytes sent as the message as they are. */
function infer(message: object | Buffer): Promise<GrpcResult> {
  return Buffer.isBuffer(message) ? inferBytes(message) : unary("ModelInfer", message);
}

// ---------------------------------------------------------------------------------------------
// Hostile messages

const NAMES = ["a", "b", "ids", "mask", "pixels", "scale", "features", "", "a\u0000", "__proto__"];
const DATATYPES = [
  "FP32",
  "FP64",
  "INT64",
  "BOOL",
  "UINT8",
  "FP16",
  "BYTES",
  "INT8",
  "UINT64",
  "fp32",
  "",
  "FP8",
  "constructor",
];
const dim = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 70 }), weight: 8 },
  fc.constantFrom(-1, -2, 4096, 5000, 2 ** 31, 2 ** 53 + 2, "9223372036854775807", "-9223372036854775808"),
);

/** `length` bytes of noise from `seed` (cheap for large lengths; any value for any datatype). */
function noise(length: number, seed: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const rawEntry = fc
  .tuple(
    fc.oneof(
      { arbitrary: fc.integer({ min: 0, max: 64 }), weight: 4 },
      { arbitrary: fc.integer({ min: 16_000, max: 40_000 }), weight: 2 },
      fc.constantFrom(3 * 8, 3 * 4 * 1500, 3 * 8 * 3000, 8 * 3000, 16_384, 16_385, 16_383),
    ),
    fc.integer(),
  )
  .map(([length, seed]) => noise(length, seed));

const contents = fc.oneof(
  { arbitrary: fc.constant(null), weight: 6 },
  fc.record({
    fp32_contents: fc.array(fc.double({ noNaN: false }), { maxLength: 12 }),
    int64_contents: fc.array(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String), {
      maxLength: 6,
    }),
    bool_contents: fc.array(fc.boolean(), { maxLength: 6 }),
    uint_contents: fc.array(fc.nat(300), { maxLength: 12 }),
    fp64_contents: fc.array(fc.double(), { maxLength: 6 }),
    bytes_contents: fc.array(
      fc.string({ maxLength: 5 }).map((s) => Buffer.from(s)),
      { maxLength: 3 },
    ),
  }),
);

const SIZES: Record<string, number> = {
  FP32: 4,
  FP64: 8,
  INT64: 8,
  BOOL: 1,
  UINT8: 1,
  FP16: 2,
  INT8: 1,
  UINT64: 8,
};

/** A raw entry for `input`: usually as long as its shape and datatype say (when that is small), else any. */
function entryFor(input: { datatype: string; shape: (number | string)[] }): fc.Arbitrary<Buffer> {
  const count = input.shape.reduce<number>((n, d) => n * Number(d), 1);
  const bytes = count * (SIZES[input.datatype] ?? 1);
  if (!(Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= 200_000)) return rawEntry;
  return fc.oneof(
    { arbitrary: fc.integer().map((seed) => noise(bytes, seed)), weight: 4 },
    { arbitrary: fc.integer({ min: -3, max: 3 }).map((d) => noise(Math.max(0, bytes + d), d)), weight: 1 },
    rawEntry,
  );
}

const hostileMessage = fc
  .record({
    model_name: fc.oneof(
      { arbitrary: fc.constantFrom("multi", "multi4k"), weight: 6 },
      fc.constantFrom("tree", "nope", "", "multi\u0000"),
    ),
    model_version: fc.constantFrom("", "", "", "1", "2", "x"),
    id: fc.string({ maxLength: 16 }),
    inputs: fc.array(
      fc.record({
        name: fc.oneof(
          { arbitrary: fc.constantFrom(...NAMES.slice(0, 6)), weight: 4 },
          fc.constantFrom(...NAMES),
        ),
        datatype: fc.oneof(
          { arbitrary: fc.constantFrom("FP32", "FP64", "INT64", "BOOL", "UINT8"), weight: 4 },
          fc.constantFrom(...DATATYPES),
        ),
        shape: fc.oneof(
          // Shapes multi4k takes: up to 3,000 rows, so that raw entries pass 16 KiB.
          { arbitrary: fc.tuple(fc.integer({ min: 0, max: 3000 }), fc.constantFrom(3, 4)), weight: 2 },
          fc.array(dim, { maxLength: 4 }),
        ),
        contents,
      }),
      { maxLength: 7 },
    ),
    outputs: fc.array(fc.record({ name: fc.constantFrom("scaled", "b_doubled", "ids_next", "nope", "") }), {
      maxLength: 3,
    }),
  })
  .chain((m) =>
    fc
      .oneof(
        // One entry per input, as a client sends them (usually without typed contents then).
        { arbitrary: fc.tuple(...m.inputs.map(entryFor)), weight: 4 },
        fc.array(rawEntry, { maxLength: 7 }),
      )
      .map((raw) => ({
        ...m,
        inputs:
          raw.length > 0 ? m.inputs.map((i, n) => (n % 4 === 3 ? i : { ...i, contents: null })) : m.inputs,
        raw_input_contents: raw,
      })),
  );

const describeMessage = (m: any) =>
  JSON.stringify({
    ...m,
    raw_input_contents: m.raw_input_contents.map((b: Buffer) => `<${b.length} bytes>`),
  }).slice(0, 2000);

describe("gRPC ModelInfer", () => {
  it("hostile messages end OK or with the code of a coded client error", () =>
    check(
      "grpcInfer",
      fc.asyncProperty(hostileMessage, async (m) => {
        checkGrpcResult(await infer(m), () => describeMessage(m));
      }),
    ));

  it("bytes that may be no message at all end OK or with the code of a coded client error", () =>
    check(
      "grpcBytes",
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }),
          // A valid message, then truncated, or with bytes flipped.
          fc.tuple(hostileMessage, fc.nat(), fc.nat(255)).map(([m, at, flip]) => {
            const bytes = Buffer.from(client().ModelInfer.requestSerialize(m) as Buffer);
            if (bytes.length === 0) return bytes;
            const i = at % bytes.length;
            if (flip % 2 === 0) return bytes.subarray(0, i);
            bytes[i] = (bytes[i] ?? 0) ^ flip;
            return bytes;
          }),
        ),
        async (bytes) => {
          checkGrpcResult(
            await infer(Buffer.from(bytes)),
            () => `${bytes.length} bytes: ${Buffer.from(bytes.subarray(0, 80)).toString("hex")}`,
          );
        },
      ),
    ));

  it("valid requests, their inputs in any order and at any offset of the message, get exact outputs", () =>
    check(
      "grpcValid",
      fc.asyncProperty(
        fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1300, max: ROWS_MAX })),
        fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 }),
        fc.nat(15),
        fc.integer(),
        async (rows, order, pad, seed) => {
          const bytes = noise(rows * 8, seed);
          const a = Float32Array.from({ length: rows * 3 }, (_, i) => (bytes[i % bytes.length]! - 128) / 8);
          const b = Float64Array.from(
            { length: rows * 3 },
            (_, i) => (bytes[(i * 7) % bytes.length]! - 100) * 1e-3,
          );
          const ids = BigInt64Array.from(
            { length: rows },
            (_, i) => BigInt(bytes.readInt32LE((i * 4) % (bytes.length - 3))) * 3n,
          );
          const mask = Uint8Array.from({ length: rows }, (_, i) => bytes[i]! & 1);
          const pixels = Uint8Array.from({ length: rows * 4 }, (_, i) => bytes[(i * 3) % bytes.length]!);
          const scale = new Float32Array([1.5]);
          const all = [
            ["a", "FP32", [rows, 3], a],
            ["b", "FP64", [rows, 3], b],
            ["ids", "INT64", [rows], ids],
            ["mask", "BOOL", [rows], mask],
            ["pixels", "UINT8", [rows, 4], pixels],
            ["scale", "FP32", [], scale],
          ] as const;
          const chosen = order.map((i) => all[i]!);
          const message = {
            model_name: "multi4k",
            id: "i".repeat(pad),
            inputs: chosen.map(([name, datatype, shape]) => ({ name, datatype, shape })),
            raw_input_contents: chosen.map(([, , , data]) =>
              Buffer.from(data.buffer, data.byteOffset, data.byteLength),
            ),
          };
          const r = await infer(message);
          const what = () => `${rows} rows, order ${order}, id of ${pad}`;
          assert.equal(r.err, null, `${r.err?.details}: ${what()}`);
          const got = new Map<string, Buffer>(
            r.res.outputs.map((o: any, i: number) => [o.name, r.res.raw_output_contents[i]]),
          );
          const want = {
            scaled: Buffer.from(Float32Array.from(a, (v) => Math.fround(v * 1.5)).buffer),
            b_doubled: Buffer.from(Float64Array.from(b, (v) => v + v).buffer),
            ids_next: Buffer.from(BigInt64Array.from(ids, (v) => v + 1n).buffer),
            mask_inverted: Buffer.from(Uint8Array.from(mask, (v) => 1 - v).buffer),
            pixel_total: Buffer.from(
              Float32Array.from(
                { length: rows },
                (_, r) => pixels[r * 4]! + pixels[r * 4 + 1]! + pixels[r * 4 + 2]! + pixels[r * 4 + 3]!,
              ).buffer,
            ),
          };
          for (const [name, bytes] of Object.entries(want))
            assert.ok(got.get(name)?.equals(bytes), `output '${name}' differs: ${what()}`);
        },
      ),
    ));
});

describe("gRPC shared memory", () => {
  // Two regions over objects of this process, registered over gRPC: inputs are read from `gin`
  // (bytes that make valid values of every datatype multi-io takes), outputs written to `gout`.
  const objects = ["in", "out", "spare"].map((n) => `${SHM_PREFIX}${process.pid}-grpc-${n}`);
  const REGION_BYTES = 65_536;
  before(async () => {
    for (const o of objects) writeFileSync(join("/dev/shm", o), Buffer.alloc(REGION_BYTES, 1));
    for (const [name, o] of [
      ["gin", objects[0]],
      ["gout", objects[1]],
    ] as const) {
      const r = await unary("SystemSharedMemoryRegister", {
        name,
        key: `/${o}`,
        offset: 0,
        byte_size: REGION_BYTES,
      });
      assert.equal(r.err, null, r.err?.details);
    }
  });
  after(() => {
    for (const o of objects) rmSync(join("/dev/shm", o), { force: true });
  });

  const int64 = fc.oneof(
    fc.nat({ max: REGION_BYTES + 10 }),
    fc.constantFrom(-1, 2 ** 53 + 2, "9223372036854775807", "-9223372036854775808"),
  );
  /** An InferParameter of any kind: mostly the kind a field wants, sometimes another. */
  const param = (usual: fc.Arbitrary<object>) =>
    fc.oneof(
      { arbitrary: usual, weight: 6 },
      fc.record({ bool_param: fc.boolean() }),
      fc.record({ string_param: fc.constantFrom("gin", "", "12") }),
      fc.record({ int64_param: int64 }),
    );
  /** How a case names a tensor's region: mostly right for its size, sometimes bent. */
  const reference = fc.record({
    region: param(
      fc.record({
        string_param: fc.oneof(
          { arbitrary: fc.constantFrom("gin", "gout"), weight: 6 },
          fc.constantFrom("nope", "", "GIN", "gin/../gout"),
        ),
      }),
    ),
    sizeDelta: fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, fc.integer({ min: -9, max: 9 })),
    size: fc.option(param(fc.record({ int64_param: int64 })), { nil: undefined }),
    offset: fc.option(
      fc.oneof(
        { arbitrary: fc.nat({ max: 64 }).map((n) => ({ int64_param: n * 8 })), weight: 4 },
        param(fc.record({ int64_param: int64 })),
      ),
      { nil: undefined },
    ),
    drop: fc.constantFrom(undefined, undefined, undefined, "region", "size"),
  });
  type Reference = typeof reference extends fc.Arbitrary<infer T> ? T : never;
  /** Right in every part: the input region, the tensor's size, an offset inside it. */
  const exact = (region: string): fc.Arbitrary<Reference> =>
    fc.nat({ max: 64 }).map((n) => ({
      region: { string_param: region },
      sizeDelta: 0,
      size: undefined,
      offset: { int64_param: n * 8 },
      drop: undefined,
    }));
  const OUTPUT_BYTES: Record<string, number> = { scaled: 12, b_doubled: 24, nope: 4 };

  /** The parameters naming a region for a tensor of `bytes` bytes, as the case bends them. */
  function parameters(bytes: number, r: Reference): Record<string, object> {
    const p: Record<string, object> = {};
    if (r.drop !== "region") p.shared_memory_region = r.region;
    if (r.drop !== "size") p.shared_memory_byte_size = r.size ?? { int64_param: bytes + r.sizeDelta };
    if (r.offset !== undefined) p.shared_memory_offset = r.offset;
    return p;
  }

  const INPUTS = [
    ["a", "FP32", (rows: number) => [rows, 3]],
    ["b", "FP64", (rows: number) => [rows, 3]],
    ["ids", "INT64", (rows: number) => [rows]],
    ["mask", "BOOL", (rows: number) => [rows]],
    ["pixels", "UINT8", (rows: number) => [rows, 4]],
    ["scale", "FP32", () => []],
  ] as const;

  it("inputs and outputs by region, with wrong names, sizes and offsets, and registrations bent, end OK or coded", () =>
    check(
      "grpcShm",
      fc.asyncProperty(
        fc.integer({ min: 1, max: 8 }),
        // Half the cases name regions rightly (so that reading them is reached), half bend them.
        fc.boolean().chain((bent) =>
          fc.array(fc.option(bent ? reference : exact("gin"), { nil: undefined }), {
            minLength: 6,
            maxLength: 6,
          }),
        ),
        fc.option(
          fc.tuple(
            fc.constantFrom("scaled", "b_doubled", "nope"),
            fc.oneof({ arbitrary: exact("gout"), weight: 2 }, reference),
          ),
          { nil: undefined },
        ),
        fc.option(
          fc.record({
            name: fc.oneof(
              fc.constantFrom("g1", "gin", "a/b", "", "x".repeat(200)),
              fc.string({ maxLength: 8 }),
            ),
            key: fc.constantFrom(`/${objects[2]}`, `/${objects[0]}`, "/", "/..", "/etc/passwd", "../x", ""),
            offset: int64,
            byte_size: int64,
          }),
          { nil: undefined },
        ),
        async (rows, refs, output, registration) => {
          // Every input's bytes are 1s (in a region or raw): valid values of each datatype.
          const bytesOf = (datatype: string, shape: number[]) =>
            shape.reduce((n, d) => n * d, 1) * SIZES[datatype]!;
          const inputs = INPUTS.map(([name, datatype, shape], i) => {
            const ref = refs[i];
            const dims = shape(rows);
            return {
              name,
              datatype,
              shape: dims,
              ...(ref ? { parameters: parameters(bytesOf(datatype, dims), ref) } : {}),
            };
          });
          const raw = INPUTS.filter((_, i) => !refs[i]).map(([, datatype, shape]) =>
            Buffer.alloc(bytesOf(datatype, shape(rows)), 1),
          );
          const message = {
            model_name: "multi",
            inputs,
            raw_input_contents: raw,
            outputs: output
              ? [{ name: output[0], parameters: parameters(rows * OUTPUT_BYTES[output[0]]!, output[1]) }]
              : [],
          };
          checkGrpcResult(await infer(message), () => JSON.stringify(message).slice(0, 2000));
          if (!registration) return;
          checkGrpcResult(await unary("SystemSharedMemoryRegister", registration), () =>
            JSON.stringify(registration),
          );
          checkGrpcResult(
            await unary("SystemSharedMemoryStatus", { name: registration.name }),
            () => registration.name,
          );
          // Never the two regions every case uses (an empty name unregisters every region).
          if (!["gin", "gout", ""].includes(registration.name))
            checkGrpcResult(
              await unary("SystemSharedMemoryUnregister", { name: registration.name }),
              () => registration.name,
            );
        },
      ),
    ));
});

server.finalCheck();
