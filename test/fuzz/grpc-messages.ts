// ModelInfer messages for the gRPC fuzz files (grpc.test.ts, tiers.test.ts): built from hostile
// parts (model names, datatypes, shapes past every limit, raw entries of any length, typed
// contents, requested outputs) for the example multi-input model `multi` and its copy `multi4k`
// (up to 4,096 rows, so that raw entries pass 16 KiB); and valid ones for multi4k, with the
// outputs multi-io computes for them.
import fc from "fast-check";

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
export function noise(length: number, seed: number): Buffer {
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

/** Bytes per element of each fixed-size datatype. */
export const SIZES: Record<string, number> = {
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

/** A ModelInfer message, hostile in any part, usually for multi or multi4k. */
export const hostileMessage = fc
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

/** A message for a failure report: its raw entries as their lengths. */
export const describeMessage = (m: any) =>
  JSON.stringify({
    ...m,
    raw_input_contents: m.raw_input_contents.map((b: Buffer) => `<${b.length} bytes>`),
  }).slice(0, 2000);

/** multi-io's inputs, as typed arrays. */
export interface MultiInputs {
  a: Float32Array;
  b: Float64Array;
  ids: BigInt64Array;
  mask: Uint8Array;
  pixels: Uint8Array;
  scale: Float32Array;
}

/**
 * A valid ModelInfer message for multi4k: 1 to 8 rows or 1,300 to `rowsMax` (raw entries past
 * 16 KiB), its inputs in any order, an id of up to 15 characters (so that the raw entries lie at
 * any offset of the message); with its inputs, and a description for failure reports.
 */
export function validMessage(
  rowsMax: number,
): fc.Arbitrary<{ message: object; inputs: MultiInputs; what: string }> {
  return fc
    .tuple(
      fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1300, max: rowsMax })),
      fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 }),
      fc.nat(15),
      fc.integer(),
    )
    .map(([rows, order, pad, seed]) => {
      const bytes = noise(rows * 8, seed);
      const inputs: MultiInputs = {
        a: Float32Array.from({ length: rows * 3 }, (_, i) => (bytes[i % bytes.length]! - 128) / 8),
        b: Float64Array.from({ length: rows * 3 }, (_, i) => (bytes[(i * 7) % bytes.length]! - 100) * 1e-3),
        ids: BigInt64Array.from(
          { length: rows },
          (_, i) => BigInt(bytes.readInt32LE((i * 4) % (bytes.length - 3))) * 3n,
        ),
        mask: Uint8Array.from({ length: rows }, (_, i) => bytes[i]! & 1),
        pixels: Uint8Array.from({ length: rows * 4 }, (_, i) => bytes[(i * 3) % bytes.length]!),
        scale: new Float32Array([1.5]),
      };
      const all = [
        ["a", "FP32", [rows, 3], inputs.a],
        ["b", "FP64", [rows, 3], inputs.b],
        ["ids", "INT64", [rows], inputs.ids],
        ["mask", "BOOL", [rows], inputs.mask],
        ["pixels", "UINT8", [rows, 4], inputs.pixels],
        ["scale", "FP32", [], inputs.scale],
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
      return { message, inputs, what: `${rows} rows, order ${order}, id of ${pad}` };
    });
}

/** What multi-io computes for `inputs`: each output's raw bytes. */
export function multiOutputs({ a, b, ids, mask, pixels }: MultiInputs): Record<string, Buffer> {
  return {
    scaled: Buffer.from(Float32Array.from(a, (v) => Math.fround(v * 1.5)).buffer),
    b_doubled: Buffer.from(Float64Array.from(b, (v) => v + v).buffer),
    ids_next: Buffer.from(BigInt64Array.from(ids, (v) => v + 1n).buffer),
    mask_inverted: Buffer.from(Uint8Array.from(mask, (v) => 1 - v).buffer),
    pixel_total: Buffer.from(
      Float32Array.from(
        { length: mask.length },
        (_, r) => pixels[r * 4]! + pixels[r * 4 + 1]! + pixels[r * 4 + 2]! + pixels[r * 4 + 3]!,
      ).buffer,
    ),
  };
}
