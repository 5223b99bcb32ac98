// The file destination of payload capture (server.capture.dir): JSON lines appended to
// capture-<UTC time>-<pid>-<n>.jsonl, a new file once the current one reaches rotateBytes, and at
// most keepFiles such files in the folder (the oldest, by name, deleted first). A failed write
// (disk full, folder gone or read-only) closes the file and rejects; the next write opens a new
// one, so the sink recovers once the disk does. The folder is created on first use.
import type { FileHandle } from "node:fs/promises";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { makePrivateDirAsync, openPrivate } from "../private-files.js";
import { type CaptureLine, type CaptureSink, timeStamp } from "./sink.js";

const FILE = /^capture-.*\.jsonl$/;

export interface FileSinkOptions {
  dir: string;
  rotateBytes: number;
  keepFiles: number;
}

export class FileSink implements CaptureSink {
  readonly batching = "immediate";
  private file: { handle: FileHandle; name: string; bytes: number } | undefined;
  private seq = 0;
  private closed = false;

  constructor(private readonly options: FileSinkOptions) {}

  async write(lines: readonly CaptureLine[]): Promise<void> {
    if (this.closed) throw new Error("the capture file sink is closed");
    try {
      let chunk: string[] = [];
      let chunkBytes = 0;
      for (const l of lines) {
        const text = `${l.text}\n`;
        const bytes = Buffer.byteLength(text);
        const current = this.file ? this.file.bytes + chunkBytes : 0;
        // A line that would take the file past rotateBytes starts the next file (a line larger
        // than rotateBytes gets a file of its own).
        if (this.file && current > 0 && current + bytes > this.options.rotateBytes) {
          await this.append(chunk.join(""), chunkBytes);
          chunk = [];
          chunkBytes = 0;
          await this.rotate();
        }
        if (!this.file) await this.openNext();
        chunk.push(text);
        chunkBytes += bytes;
      }
      if (chunk.length) await this.append(chunk.join(""), chunkBytes);
    } catch (err) {
      await this.closeFile();
      throw err;
    }
  }

  /** The capture files in the folder, oldest first. */
  async files(): Promise<string[]> {
    return (await readdir(this.options.dir)).filter((n) => FILE.test(n)).sort();
  }

  private async append(text: string, bytes: number): Promise<void> {
    const file = this.file!;
    await file.handle.appendFile(text, "utf8");
    file.bytes += bytes;
  }

  private async openNext(): Promise<void> {
    // Captured payloads are what tenants sent and got: the folder (when modelport makes it) and
    // each file are owner-only (private-files.ts).
    await makePrivateDirAsync(this.options.dir);
    const name = `capture-${timeStamp(new Date())}-${process.pid}-${String(++this.seq).padStart(6, "0")}.jsonl`;
    const handle = await openPrivate(join(this.options.dir, name), "a");
    this.file = { handle, name, bytes: 0 };
    await this.prune(name);
  }

  private async rotate(): Promise<void> {
    await this.closeFile();
    await this.openNext();
  }

  /** Deletes the oldest capture files beyond keepFiles, never the one being written. */
  private async prune(current: string): Promise<void> {
    const names = (await this.files()).filter((n) => n !== current);
    const excess = names.length + 1 - this.options.keepFiles;
    for (const name of names.slice(0, Math.max(0, excess)))
      await rm(join(this.options.dir, name), { force: true });
  }

  private async closeFile(): Promise<void> {
    const file = this.file;
    this.file = undefined;
    await file?.handle.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.closeFile();
  }
}
