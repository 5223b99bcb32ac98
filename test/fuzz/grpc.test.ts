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
import { describeMessage, hostileMessage, multiOutputs, SIZES, validMessage } from "./grpc-messages.js";
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
      fc.asyncProperty(validMessage(ROWS_MAX), async ({ message, inputs, what }) => {
        const r = await infer(message);
        assert.equal(r.err, null, `${r.err?.details}: ${what}`);
        const got = new Map<string, Buffer>(
          r.res.outputs.map((o: any, i: number) => [o.name, r.res.raw_output_contents[i]]),
        );
        for (const [name, bytes] of Object.entries(multiOutputs(inputs)))
          assert.ok(got.get(name)?.equals(bytes), `output '${name}' differs: ${what}`);
      }),
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
