// A gRPC ModelInferRequest's raw_input_contents as the model's input memory, without a copy:
// src/protocol/align-in-place.ts moves misaligned entries to aligned places within the message's
// own memory, src/grpc/proto.ts marks a message that is all its memory holds, and
// decodeGrpcInputs makes views of it. Checked here: every entry keeps its bytes whatever the
// layout (random layouts, every misalignment, gaps too small to move into), nothing outside a
// request's own memory is touched, a message framed as grpc-js frames it decodes into views of that
// memory at every offset, and grpc-js 1.14 really hands its deserializer such memory (a real
// server and client on loopback), so that an upgrade that stops doing so fails here.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { inferenceService, ownsItsMemory } from "../../src/grpc/proto.js";
import { alignInPlace } from "../../src/protocol/align-in-place.js";
import { ownBodyMemory } from "../../src/protocol/body-memory.js";
import { decodeGrpcInputs, type GrpcInferRequest } from "../../src/protocol/grpc-infer.js";
import type { ModelSignature } from "../../src/tensor.js";

/** A deterministic generator (mulberry32), so that a failing layout can be replayed. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Layout {
  buffer: ArrayBuffer;
  entries: Uint8Array[];
  sizes: number[];
  /** Each entry's bytes, copied before the call. */
  before: Uint8Array[];
}

/** Entries laid out one after another from `start`, `gap(i)` bytes apart, filled with noise. */
function layout(next: () => number, start: number, count: number, gap: (i: number) => number): Layout {
  const sizes: number[] = [];
  const lengths: number[] = [];
  for (let i = 0; i < count; i++) {
    const size = [1, 2, 4, 8][Math.floor(next() * 4)]!;
    sizes.push(size);
    // Most at least 16 KiB (moved when misaligned), some smaller (never moved).
    lengths.push(size * Math.floor(((next() < 0.8 ? 16384 : 64) + next() * 4096) / size));
  }
  const total = start + lengths.reduce((a, b) => a + b, 0) + count * 16 + 16;
  const buffer = new ArrayBuffer(total);
  const all = new Uint8Array(buffer);
  for (let i = 0; i < total; i++) all[i] = Math.floor(next() * 256);
  const entries: Uint8Array[] = [];
  let at = start;
  for (let i = 0; i < count; i++) {
    at += gap(i);
    entries.push(new Uint8Array(buffer, at, lengths[i]));
    at += lengths[i]!;
  }
  return { buffer, entries, sizes, before: entries.map((e) => e.slice()) };
}

describe("alignInPlace", () => {
  it("random layouts: every entry keeps its bytes; a moved one is aligned and lies after the one before it", () => {
    const next = random(20261204);
    let moved = 0;
    let kept = 0;
    for (let round = 0; round < 300; round++) {
      const l = layout(
        next,
        Math.floor(next() * 9),
        1 + Math.floor(next() * 5),
        () => 2 + Math.floor(next() * 6),
      );
      ownBodyMemory(l.buffer);
      const out = alignInPlace(l.entries, l.sizes, () => true);
      let end = 0;
      out.forEach((view, i) => {
        assert.equal(view.buffer, l.buffer);
        assert.deepEqual(view, l.before[i], `round ${round}, entry ${i}`);
        assert.ok(view.byteOffset >= end, `round ${round}: entry ${i} overlaps the one before`);
        end = view.byteOffset + view.byteLength;
        const misaligned = l.entries[i]!.byteOffset % l.sizes[i]! !== 0;
        if (view.byteOffset !== l.entries[i]!.byteOffset) {
          moved++;
          assert.equal(view.byteOffset % l.sizes[i]!, 0);
          assert.ok(l.entries[i]!.byteOffset - view.byteOffset < l.sizes[i]!);
        } else if (misaligned && view.byteLength >= 16384) kept++;
      });
    }
    // Both outcomes occur: the layouts above leave some gaps too small to move into.
    assert.ok(moved > 100, `moved ${moved}`);
    assert.ok(kept > 0, `kept ${kept}`);
  });

  it("every misalignment of an FP64 and an FP32 entry, two bytes apart: both aligned when the bytes before allow it", () => {
    for (let start = 0; start < 16; start++) {
      const buffer = new ArrayBuffer(start + 20000 + 2 + 20000 + 8);
      const all = new Uint8Array(buffer);
      all.forEach((_, i) => {
        all[i] = (i * 31 + start) & 0xff;
      });
      const a = new Uint8Array(buffer, start, 20000);
      const b = new Uint8Array(buffer, start + 20002, 20000);
      const before = [a.slice(), b.slice()];
      const [x, y] = alignInPlace([a, b], [8, 4], () => true);
      assert.deepEqual(x, before[0]);
      assert.deepEqual(y, before[1]);
      assert.equal(x!.byteOffset % 8, 0, `start ${start}`);
      // The FP32 entry can move back up to 3 bytes: 2 of the gap, plus what the first one's move freed.
      const room = 2 + (a.byteOffset - x!.byteOffset);
      assert.equal(y!.byteOffset % 4 === 0, (start + 20002) % 4 <= room, `start ${start}`);
    }
  });

  it("memory that is not a request's own, and entries under 16 KiB, are left as they are", () => {
    const l = layout(random(7), 3, 3, () => 5);
    const whole = new Uint8Array(l.buffer).slice();
    const out = alignInPlace(l.entries, [4, 8, 4], () => false);
    assert.deepEqual(
      out.map((view, i) => view === l.entries[i]),
      [true, true, true],
    );
    assert.deepEqual(new Uint8Array(l.buffer), whole);
    const small = new Uint8Array(new ArrayBuffer(9000), 1, 8000);
    assert.equal(alignInPlace([small], [4], () => true)[0], small);
  });
});

describe("ModelInfer's raw_input_contents", () => {
  const service = inferenceService();
  const method = service.ModelInfer!;
  const signature: ModelSignature = {
    inputs: [
      { name: "a", datatype: "FP32", shape: [-1, 3] },
      { name: "b", datatype: "FP64", shape: [-1, 3] },
      { name: "ids", datatype: "INT64", shape: [-1] },
    ],
    outputs: [{ name: "y", datatype: "FP32", shape: [-1] }],
    batchable: true,
  };
  // Every input at least 16 KiB, so that each is a view rather than a copy.
  const rows = 2100;
  const a = Float32Array.from({ length: rows * 3 }, (_, i) => i / 7);
  const b = Float64Array.from({ length: rows * 3 }, (_, i) => -i / 3);
  const ids = BigInt64Array.from({ length: rows }, (_, i) => BigInt(i) * 1_000_000_007n);
  const bytesOf = (t: ArrayBufferView) => Buffer.from(t.buffer, t.byteOffset, t.byteLength);

  it("a message framed as grpc-js frames it becomes views of its own memory, at every offset", () => {
    for (let pad = 0; pad < 8; pad++) {
      const request = {
        model_name: "m",
        id: "x".repeat(pad),
        inputs: [
          { name: "a", datatype: "FP32", shape: [rows, 3] },
          { name: "b", datatype: "FP64", shape: [rows, 3] },
          { name: "ids", datatype: "INT64", shape: [rows] },
        ],
        raw_input_contents: [bytesOf(a), bytesOf(b), bytesOf(ids)],
      };
      const message = method.requestSerialize(request);
      // grpc-js: the 5-byte frame header and the message, joined into memory of their own.
      const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
      const bytes = framed.subarray(5);
      assert.ok(ownsItsMemory(bytes));
      const decoded = method.requestDeserialize(bytes) as GrpcInferRequest;
      const tensors = decodeGrpcInputs(decoded, signature, { maxBatchRows: 4096 });
      assert.deepEqual(tensors.a!.data, a, `pad ${pad}`);
      assert.deepEqual(tensors.b!.data, b, `pad ${pad}`);
      assert.deepEqual(tensors.ids!.data, ids, `pad ${pad}`);
      for (const name of ["a", "b", "ids"]) {
        const data = tensors[name]!.data as ArrayBufferView;
        assert.equal(data.buffer, framed.buffer, `pad ${pad}: '${name}' is a copy`);
      }
    }
  });

  it("a message in memory that holds more than it is copied from, and that memory is left as it was", () => {
    const request = {
      model_name: "m",
      id: "x",
      inputs: [{ name: "a", datatype: "FP32", shape: [rows, 3] }],
      raw_input_contents: [bytesOf(a)],
    };
    const message = method.requestSerialize(request);
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message, Buffer.alloc(3)]);
    const bytes = framed.subarray(5, 5 + message.length);
    assert.equal(ownsItsMemory(bytes), false);
    const whole = Buffer.from(framed);
    const decoded = method.requestDeserialize(bytes) as GrpcInferRequest;
    const tensors = decodeGrpcInputs(
      decoded,
      { ...signature, inputs: [signature.inputs[0]!] },
      { maxBatchRows: 4096 },
    );
    assert.deepEqual(tensors.a!.data, a);
    assert.notEqual((tensors.a!.data as Float32Array).buffer, framed.buffer);
    assert.deepEqual(framed, whole);
  });

  describe("grpc-js hands the deserializer a message that is all its memory holds", () => {
    const server = new grpc.Server();
    const client: { close(): void }[] = [];
    after(() => {
      for (const c of client) c.close();
      server.forceShutdown();
    });

    it("a 100 KB message does; a 1 KB one does not (it may share Buffer's pool)", async () => {
      const seen: boolean[] = [];
      const identity = (b: Buffer) => b;
      server.addService(
        {
          Echo: {
            path: "/t.T/Echo",
            requestStream: false,
            responseStream: false,
            requestSerialize: identity,
            requestDeserialize: (b: Buffer) => {
              seen.push(ownsItsMemory(b));
              return b;
            },
            responseSerialize: identity,
            responseDeserialize: identity,
          },
        },
        {
          Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, done: grpc.sendUnaryData<Buffer>) =>
            done(null, Buffer.from([call.request.length & 0xff])),
        },
      );
      const port = await new Promise<number>((resolve, reject) =>
        server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
          err ? reject(err) : resolve(p),
        ),
      );
      const c = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      client.push(c);
      const send = (size: number) =>
        new Promise<void>((resolve, reject) =>
          c.makeUnaryRequest(
            "/t.T/Echo",
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.alloc(size, 7),
            (err) => (err ? reject(err) : resolve()),
          ),
        );
      await send(100_000);
      await send(1_000);
      await send(100_000);
      assert.deepEqual(seen, [true, false, true]);
    });
  });
});
