// Entry point of a model's child process (placement "process"): waits for its spec, then serves
// the model exactly as a worker thread does: its load report over the IPC channel, batches and
// answers as frames on the frame channel (tensor-frames.ts). The process is the model's own, so a
// native crash or an out-of-memory kill here cannot take the HTTP server down.
import { type OnReadOpts, Socket, type SocketConstructorOpts } from "node:net";
import { applyHeapGrowth } from "../heap-growth.js";
import { applyMallocThresholds } from "../malloc-thresholds.js";
import { serveModel } from "./serve-model.js";
import { FRAME_CHANNEL_FD, FrameReader, writeFrame } from "./tensor-frames.js";
import type { FromWorker, ToProcess, ToWorker } from "./worker-protocol.js";

if (!process.send) {
  process.stderr.write("process-main.js is started by modelport's ProcessRunner, not by hand\n");
  process.exit(2);
}

// As the server's own process: tensors are external memory that V8's collector counts
// (heap-growth.ts), and blocks of megabytes that glibc would unmap when freed (malloc-thresholds.ts).
applyHeapGrowth();
applyMallocThresholds();

// The server went away (exited, crashed or was SIGKILLed): the IPC channel closes, and a
// runner without its server must not live on holding the model's memory.
process.on("disconnect", () => process.exit(0));

const listeners: ((msg: ToWorker) => void)[] = [];
const reader = new FrameReader((msg) => {
  for (const l of listeners) l(msg as ToWorker);
});
// The socket reads into memory this side chooses (`onread`): while a large tensor is arriving,
// straight into that tensor's memory, so the kernel's copy is the only one; everything else
// (lengths, headers, small tensors) into one scratch buffer whose bytes push() copies out. The
// callback gets the buffer the read went into.
const scratch = Buffer.allocUnsafe(64 * 1024);
const readInto = (): Uint8Array => reader.target() ?? scratch;
function onRead(n: number, buffer: Uint8Array): boolean {
  try {
    if (buffer === scratch) reader.push(buffer.subarray(0, n));
    else reader.advance(n);
  } catch (err) {
    process.stderr.write(`runner process ${process.pid}: ${(err as Error).message}\n`);
    process.exit(1);
  }
  return true;
}
// `onread` is a documented option of new net.Socket() (Node's net docs) that this @types/node
// version lists only for connect().
const options: SocketConstructorOpts & { onread: OnReadOpts } = {
  fd: FRAME_CHANNEL_FD,
  readable: true,
  writable: true,
  onread: { buffer: readInto, callback: onRead },
};
const frames = new Socket(options);
// So does the frame channel; and a frame this side cannot read (onRead) means the two sides no
// longer agree.
frames.on("end", () => process.exit(0));
frames.on("error", () => process.exit(0));

function send(msg: FromWorker): void {
  // After "closed" or "load-failed" there is nothing left to do; a failed send means the parent is gone.
  const last = msg.type === "closed" || msg.type === "load-failed";
  const done = (err?: Error | null) => {
    if (err || last) process.exit(0);
  };
  if (msg.type === "loaded" || msg.type === "load-failed") {
    if (process.connected) process.send!(msg, undefined, {}, done);
  } else writeFrame(frames, msg, done);
}

let started = false;
process.on("message", (msg: ToProcess) => {
  if (started) return;
  started = true;
  void serveModel(msg.data, { send, onMessage: (listener) => listeners.push(listener) });
});
