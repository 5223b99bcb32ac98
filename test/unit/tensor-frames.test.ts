// The frames a child-process runner's batches and answers travel in (src/runner/tensor-frames.ts):
// every kind of tensor data comes back equal, in memory of its own, however the byte stream is
// cut, or read straight into a large tensor's memory as the child process reads its batches; a
// frame the reader cannot make sense of is refused, not half-read.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FrameReader, type FrameSink, writeFrame } from "../../src/runner/tensor-frames.js";
import type { FromWorker, ToWorker } from "../../src/runner/worker-protocol.js";
import type { TensorMap } from "../../src/tensor.js";

type Message = ToWorker | FromWorker;

/** A sink that keeps what is written, in the order it was written, as one byte string. */
function collect(): FrameSink & { bytes(): Buffer; writes: number; corked: number } {
  const chunks: Buffer[] = [];
  const sink = {
    writes: 0,
    corked: 0,
    cork() {
      sink.corked++;
    },
    uncork() {},
    write(chunk: Uint8Array, cb?: (err?: Error | null) => void) {
      sink.writes++;
      chunks.push(Buffer.from(chunk));
      cb?.(null);
      return true;
    },
    bytes: () => Buffer.concat(chunks),
  };
  return sink;
}

/** A view in the middle of a larger buffer, as a request body's tensors are. */
function offsetView(values: number[]): Float32Array {
  const memory = new ArrayBuffer(8 + values.length * 4 + 8);
  const view = new Float32Array(memory, 8, values.length);
  view.set(values);
  return view;
}

function everyKind(n: number): TensorMap {
  const ramp = (i: number) => ((i * 7919) % 1000) - 500;
  return {
    f32: { datatype: "FP32", shape: [n], data: Float32Array.from({ length: n }, (_, i) => ramp(i) / 3) },
    f64: { datatype: "FP64", shape: [n], data: Float64Array.from({ length: n }, (_, i) => ramp(i) / 7) },
    i8: { datatype: "INT8", shape: [n], data: Int8Array.from({ length: n }, (_, i) => ramp(i) % 128) },
    i16: { datatype: "INT16", shape: [n], data: Int16Array.from({ length: n }, (_, i) => ramp(i) * 60) },
    i32: {
      datatype: "INT32",
      shape: [n],
      data: Int32Array.from({ length: n }, (_, i) => ramp(i) * 4_000_000),
    },
    i64: {
      datatype: "INT64",
      shape: [n],
      data: BigInt64Array.from({ length: n }, (_, i) => BigInt(ramp(i)) * 10n ** 15n),
    },
    u8: { datatype: "BOOL", shape: [n], data: Uint8Array.from({ length: n }, (_, i) => i % 2) },
    u16: { datatype: "UINT16", shape: [n], data: Uint16Array.from({ length: n }, (_, i) => i * 31) },
    u32: { datatype: "UINT32", shape: [n], data: Uint32Array.from({ length: n }, (_, i) => i * 2_000_003) },
    u64: {
      datatype: "UINT64",
      shape: [n],
      data: BigUint64Array.from({ length: n }, (_, i) => BigInt(i) << 40n),
    },
    text: { datatype: "BYTES", shape: [3], data: ["", "naïve ✓", "a\u0000b"] },
    scalar: { datatype: "FP32", shape: [], data: Float32Array.of(Math.PI) },
    empty: { datatype: "FP32", shape: [0, 3], data: new Float32Array(0) },
    view: { datatype: "FP32", shape: [2, 2], data: offsetView([1.5, -2.5, 3.25, 1e-30]) },
  };
}

function assertSameTensors(got: TensorMap, sent: TensorMap): void {
  assert.deepEqual(Object.keys(got), Object.keys(sent));
  for (const [name, t] of Object.entries(sent)) {
    const g = got[name]!;
    assert.equal(g.datatype, t.datatype, name);
    assert.deepEqual(g.shape, t.shape, name);
    assert.equal(g.data.constructor, t.data.constructor, `${name}: the same kind of array`);
    assert.deepEqual(
      Array.from(g.data as ArrayLike<unknown>),
      Array.from(t.data as ArrayLike<unknown>),
      name,
    );
    if (!Array.isArray(g.data)) {
      const d = g.data;
      assert.equal(d.byteOffset, 0, `${name}: memory of its own`);
      assert.equal(d.buffer.byteLength, d.byteLength, `${name}: memory of its own`);
    }
  }
}

/** Writes `messages` as frames and reads the byte stream back, cut into pieces by `cut`. */
function roundTrip(messages: Message[], cut: (stream: Buffer) => Buffer[]): Message[] {
  const sink = collect();
  for (const m of messages) writeFrame(sink, m);
  const got: Message[] = [];
  const reader = new FrameReader((m) => got.push(m));
  for (const piece of cut(sink.bytes())) reader.push(piece);
  return got;
}

/**
 * Reads the stream as the child process does (net.Socket's onread): into FrameReader.target() when
 * it offers memory, else into a scratch buffer that is pushed; each read takes up to `size(i)`
 * bytes, as a socket hands over what has arrived. Returns the messages and the bytes read direct.
 */
function readDirect(messages: Message[], size: (i: number) => number): { got: Message[]; direct: number } {
  const sink = collect();
  for (const m of messages) writeFrame(sink, m);
  const stream = sink.bytes();
  const got: Message[] = [];
  const reader = new FrameReader((m) => got.push(m));
  const scratch = Buffer.alloc(64 * 1024);
  let direct = 0;
  for (let at = 0, i = 0; at < stream.length; i++) {
    const target = reader.target();
    const into = target ?? scratch;
    const n = Math.min(into.length, size(i), stream.length - at);
    into.set(stream.subarray(at, at + n));
    at += n;
    if (target) {
      direct += n;
      reader.advance(n);
    } else {
      reader.push(scratch.subarray(0, n));
      scratch.fill(0xee); // the reader must have copied what it keeps
    }
  }
  return { got, direct };
}

const whole = (b: Buffer) => [b];
const byteByByte = (b: Buffer) => Array.from({ length: b.length }, (_, i) => b.subarray(i, i + 1));
function seededCuts(seed: number) {
  return (b: Buffer) => {
    let s = seed;
    const pieces: Buffer[] = [];
    for (let at = 0; at < b.length; ) {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      const n = 1 + (s % 70_000);
      pieces.push(b.subarray(at, at + n));
      at += n;
    }
    return pieces;
  };
}

describe("runner frames", () => {
  it("a batch of every kind of tensor comes back equal, each in memory of its own, however the stream is cut", () => {
    const inputs = everyKind(5);
    const msg: ToWorker = { type: "predict", id: 41, inputs };
    for (const cut of [whole, byteByByte, seededCuts(7)]) {
      const [got, ...rest] = roundTrip([msg], cut);
      assert.equal(rest.length, 0);
      assert.equal(got!.type, "predict");
      assert.equal((got as { id: number }).id, 41);
      assertSameTensors((got as { inputs: TensorMap }).inputs, inputs);
    }
  });

  it("large answers and small messages in one stream keep their order and fields", () => {
    const big: TensorMap = {
      y: {
        datatype: "FP32",
        shape: [300_000],
        data: Float32Array.from({ length: 300_000 }, (_, i) => i / 9),
      },
      ids: { datatype: "INT64", shape: [2], data: BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n) },
    };
    const messages: Message[] = [
      { type: "result", id: 1, outputs: big, computeMs: 12.5, rss: 123_456_789 },
      {
        type: "error",
        id: 2,
        error: { code: "MP_ERR_HANDLER_FAILED", message: "no", details: { at: 3n, why: ["x"] } },
      },
      { type: "result", id: 3, outputs: everyKind(70_000) },
      { type: "closed" },
    ];
    for (const cut of [whole, seededCuts(1), seededCuts(2)]) {
      const got = roundTrip(messages, cut);
      assert.deepEqual(
        got.map((m) => m.type),
        ["result", "error", "result", "closed"],
      );
      const first = got[0] as Extract<FromWorker, { type: "result" }>;
      assert.equal(first.computeMs, 12.5);
      assert.equal(first.rss, 123_456_789);
      assertSameTensors(first.outputs, big);
      assert.deepEqual(got[1], messages[1]);
      assertSameTensors((got[2] as Extract<FromWorker, { type: "result" }>).outputs, everyKind(70_000));
    }
  });

  it("read straight into a large tensor's memory, as the child reads, the messages come back equal", () => {
    const big = Float32Array.from({ length: 300_000 }, (_, i) => Math.sin(i));
    const messages: Message[] = [
      { type: "predict", id: 1, inputs: { x: { datatype: "FP32", shape: [300_000], data: big } } },
      { type: "predict", id: 2, inputs: everyKind(5) },
      { type: "predict", id: 3, inputs: everyKind(40_000) },
      { type: "close" },
    ];
    let seed = 11;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return 1 + (seed % 200_000);
    };
    const sizes = [() => 65_536, () => 1_000_000, (i: number) => 1 + ((i * 7919) % 90_000), random];
    for (const size of sizes) {
      const { got, direct } = readDirect(messages, size);
      assert.deepEqual(
        got.map((m) => m.type),
        ["predict", "predict", "predict", "close"],
      );
      assertSameTensors(
        (got[0] as { inputs: TensorMap }).inputs,
        messages[0]!.type === "predict" ? messages[0]!.inputs : {},
      );
      assertSameTensors((got[1] as { inputs: TensorMap }).inputs, everyKind(5));
      assertSameTensors((got[2] as { inputs: TensorMap }).inputs, everyKind(40_000));
      // The 1.2 MB tensor's bytes, but for what came with its frame's header, were read in place.
      assert.ok(direct > 1_000_000, `${direct} bytes read straight into tensors`);
    }
  });

  it("refuses a direct read it did not offer", () => {
    const reader = new FrameReader(() => {});
    assert.equal(reader.target(), undefined, "nothing to read into before a frame's header");
    assert.throws(() => reader.advance(1), /past where it was offered/);
    const sink = collect();
    writeFrame(sink, {
      type: "predict",
      id: 1,
      inputs: { x: { datatype: "FP32", shape: [100_000], data: new Float32Array(100_000) } },
    });
    const stream = sink.bytes();
    const start = 4 + stream.readUInt32LE(0) + 10; // the length, the header, 10 of the tensor's bytes
    reader.push(stream.subarray(0, start));
    const target = reader.target()!;
    assert.equal(target.length, stream.length - start);
    assert.throws(() => reader.advance(target.length + 1), /past where it was offered/);
  });

  it("a handler's plain arrays cross as they were", () => {
    const inputs = { x: { datatype: "FP32", shape: [3], data: [1, 2.5, -3] } } as unknown as TensorMap;
    const [got] = roundTrip([{ type: "predict", id: 1, inputs }], byteByByte);
    assert.deepEqual((got as { inputs: TensorMap }).inputs, inputs);
  });

  it("a large frame goes out as the tensor's own memory, a small one as one write", () => {
    const sink = collect();
    writeFrame(sink, { type: "predict", id: 1, inputs: { x: everyKind(1).f32! } });
    assert.deepEqual([sink.writes, sink.corked], [1, 0]);
    const large = collect();
    const data = new Float32Array(100_000);
    writeFrame(large, {
      type: "predict",
      id: 2,
      inputs: { x: { datatype: "FP32", shape: [100_000], data } },
    });
    assert.equal(large.corked, 1);
    assert.equal(large.writes, 3, "length, header, the tensor's bytes");
  });

  it("calls back once the frame's last byte is handed on", () => {
    for (const n of [1, 100_000]) {
      const sink = collect();
      let calls = 0;
      writeFrame(sink, { type: "result", id: 1, outputs: { y: everyKind(n).f32! } }, () => calls++);
      assert.equal(calls, 1, `${n} values`);
    }
  });

  it("refuses a frame it cannot read: an empty header, or a tensor of an unknown kind", () => {
    const reader = new FrameReader(() => assert.fail("no message expected"));
    assert.throws(() => reader.push(Buffer.alloc(4)), /empty header/);
    const sink = collect();
    writeFrame(sink, { type: "predict", id: 1, inputs: { x: everyKind(2).f32! } });
    const bytes = sink.bytes();
    const tampered = Buffer.from(bytes.toString("latin1").replace("Float32Array", "Float33Array"), "latin1");
    assert.notDeepEqual(tampered, bytes);
    assert.throws(() => new FrameReader(() => {}).push(tampered), /malformed tensor 'x'/);
  });
});
