// The runner protocol's messages as frames on a byte stream, for a model in a child process
// (process-runner.ts, process-main.ts). Over the IPC channel, V8's serializer copied a large tensor
// twice on the sending side (into the serialized message, then into the length-prefixed frame)
// and the receiver joined the socket's chunks into a third copy, all of it fresh memory for the
// collector: 4.9 MB in and 2.1 MB out cost ~8 ms a call more than a worker thread. Here a tensor's
// memory goes to the socket as it lies, and the receiver copies each tensor once, from the
// socket's chunks into memory of its own, sized and aligned for it; a receiver that chooses where
// the socket reads into (net.Socket's `onread`, in the child) has the kernel write a large tensor
// straight into that memory instead (FrameReader.target).
//
// A frame: the header's length (u32, little-endian), the header (V8-serialized: the message with
// its tensors replaced by their descriptions), then the bytes of each typed-array tensor in the
// header's order. Tensors of any other kind (BYTES strings, a handler's plain arrays) travel inside
// the header, as the IPC channel carried them.
import { deserialize, serialize } from "node:v8";
import type { TensorData, TensorMap } from "../tensor.js";
import type { FromWorker, ToWorker } from "./worker-protocol.js";

/** The child's file descriptor of the frame channel (its stdio slot; the IPC channel is slot 3). */
export const FRAME_CHANNEL_FD = 4;

type Message = ToWorker | FromWorker;

/** Frames up to this many bytes are copied into one buffer and written at once. */
const SMALL_FRAME = 64 * 1024;

/** A tensor's bytes still to come from which FrameReader.target offers its memory to read into. */
const DIRECT_READ = 64 * 1024;

const ARRAYS = {
  Float32Array,
  Float64Array,
  Int8Array,
  Int16Array,
  Int32Array,
  BigInt64Array,
  Uint8Array,
  Uint16Array,
  Uint32Array,
  BigUint64Array,
} as const;
type ArrayName = keyof typeof ARRAYS;
const ARRAY_NAMES = Object.keys(ARRAYS) as ArrayName[];

/** A tensor in the header: its bytes follow the header (`array`, `bytes`), or its data is here. */
interface TensorHead {
  name: string;
  datatype: string;
  shape: number[];
  array?: ArrayName;
  bytes?: number;
  data?: unknown;
}

interface Header {
  message: Message;
  /** The message's field that holds its tensors. */
  field?: "inputs" | "outputs";
  tensors: TensorHead[];
}

function arrayName(d: TensorData): ArrayName | undefined {
  if (Array.isArray(d)) return undefined;
  return ARRAY_NAMES.find((n) => d instanceof ARRAYS[n]);
}

function tensorField(msg: Message): "inputs" | "outputs" | undefined {
  return msg.type === "predict" ? "inputs" : msg.type === "result" ? "outputs" : undefined;
}

/** The stream side a frame is written to (a net.Socket). */
export interface FrameSink {
  cork(): void;
  uncork(): void;
  write(chunk: Uint8Array, cb?: (err?: Error | null) => void): boolean;
}

/**
 * Writes `msg` as one frame. Its tensors' memory is written as it lies, so it must not change until
 * the socket has taken it (nothing on either side writes into a tensor once it is sent).
 * `done` is called once the frame's last byte has been handed to the socket (or failed).
 */
export function writeFrame(sink: FrameSink, msg: Message, done?: (err?: Error | null) => void): void {
  const field = tensorField(msg);
  const map: TensorMap = field ? ((msg as Record<string, unknown>)[field] as TensorMap) : {};
  const tensors: TensorHead[] = [];
  const parts: Uint8Array[] = [];
  for (const [name, t] of Object.entries(map)) {
    const array = arrayName(t.data);
    if (!array) {
      tensors.push({ name, datatype: t.datatype, shape: t.shape, data: t.data });
      continue;
    }
    const d = t.data as Exclude<TensorData, string[]>;
    tensors.push({ name, datatype: t.datatype, shape: t.shape, array, bytes: d.byteLength });
    if (d.byteLength > 0) parts.push(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
  }
  const header: Header = { message: field ? { ...msg, [field]: {} } : msg, field, tensors };
  const body = serialize(header);
  let size = 4 + body.length;
  for (const p of parts) size += p.length;
  if (size <= SMALL_FRAME) {
    // One write of one buffer: cheaper than the socket's gather list for a few bytes.
    const frame = Buffer.allocUnsafe(size);
    frame.writeUInt32LE(body.length, 0);
    let at = 4 + body.copy(frame, 4);
    for (const p of parts) {
      frame.set(p, at);
      at += p.length;
    }
    sink.write(frame, done);
    return;
  }
  const length = Buffer.allocUnsafe(4);
  length.writeUInt32LE(body.length, 0);
  sink.cork();
  sink.write(length);
  sink.write(body, parts.length === 0 ? done : undefined);
  for (let i = 0; i < parts.length; i++) sink.write(parts[i]!, i === parts.length - 1 ? done : undefined);
  sink.uncork();
}

/**
 * Reads frames from a byte stream's chunks, however they are cut, and hands each message on whole.
 * A malformed frame throws from push(); the channel is then unusable and its owner ends it.
 */
export class FrameReader {
  readonly #onMessage: (msg: Message) => void;
  readonly #lengthBytes = Buffer.allocUnsafe(4);
  /** What the stream's next bytes fill: the header's length, the header, or a tensor's memory. */
  #part: "length" | "header" | "tensor" = "length";
  #want: Uint8Array = this.#lengthBytes;
  #filled = 0;
  /** The frame whose tensors are being read. */
  #frame: { header: Header; tensors: TensorMap; next: number } | undefined;

  constructor(onMessage: (msg: Message) => void) {
    this.#onMessage = onMessage;
  }

  /** Reads a chunk of the stream; keeps no reference to it (the caller may reuse its memory). */
  push(chunk: Uint8Array): void {
    let at = 0;
    while (at < chunk.length) {
      const n = Math.min(this.#want.length - this.#filled, chunk.length - at);
      this.#want.set(chunk.subarray(at, at + n), this.#filled);
      this.#filled += n;
      at += n;
      if (this.#filled === this.#want.length) this.#partDone();
    }
  }

  /**
   * Where the stream's next bytes can be read straight into, skipping push()'s copy: the rest of
   * the memory of the tensor being received, while at least DIRECT_READ bytes of it are to come;
   * undefined otherwise (read a chunk and push() it). After reading n bytes into it, advance(n).
   */
  target(): Uint8Array | undefined {
    if (this.#part !== "tensor" || this.#want.length - this.#filled < DIRECT_READ) return undefined;
    return this.#want.subarray(this.#filled);
  }

  /** Counts `n` bytes read into target()'s memory. */
  advance(n: number): void {
    if (this.#part !== "tensor" || !(n >= 0 && this.#filled + n <= this.#want.length))
      throw new Error(`a runner frame read of ${n} bytes past where it was offered`);
    this.#filled += n;
    if (this.#filled === this.#want.length) this.#partDone();
  }

  /** The part being filled is whole: on to the header, or to the frame's next tensor. */
  #partDone(): void {
    this.#filled = 0;
    if (this.#part === "length") {
      const length = this.#lengthBytes.readUInt32LE(0);
      if (length === 0) throw new Error("a runner frame with an empty header");
      this.#part = "header";
      this.#want = Buffer.allocUnsafe(length);
      return;
    }
    if (this.#part === "header")
      this.#frame = { header: deserialize(this.#want) as Header, tensors: {}, next: 0 };
    this.#nextTensor();
  }

  /** Takes the frame's tensors up to the next one whose bytes are to come; hands on the message when none is. */
  #nextTensor(): void {
    const frame = this.#frame!;
    const heads = frame.header.tensors;
    while (frame.next < heads.length) {
      const head = heads[frame.next++]!;
      if (head.array === undefined) {
        frame.tensors[head.name] = {
          datatype: head.datatype,
          shape: head.shape,
          data: head.data,
        } as TensorMap[string];
        continue;
      }
      const Ctor = ARRAYS[head.array];
      const bytes = head.bytes ?? -1;
      if (!Ctor || !Number.isSafeInteger(bytes) || bytes < 0 || bytes % Ctor.BYTES_PER_ELEMENT !== 0)
        throw new Error(`a runner frame with a malformed tensor '${head.name}'`);
      // Memory of its own for each tensor: aligned for its type, and whole (so it can be moved on);
      // not zeroed, since every byte is written next.
      const memory = Buffer.allocUnsafeSlow(bytes).buffer as ArrayBuffer;
      frame.tensors[head.name] = {
        datatype: head.datatype,
        shape: head.shape,
        data: new Ctor(memory),
      } as TensorMap[string];
      if (bytes > 0) {
        this.#part = "tensor";
        this.#want = new Uint8Array(memory);
        return;
      }
    }
    this.#frame = undefined;
    this.#part = "length";
    this.#want = this.#lengthBytes;
    const { message, field } = frame.header;
    this.#onMessage(field ? ({ ...message, [field]: frame.tensors } as Message) : message);
  }
}
