// A real S3-protocol server (s3rver) on 127.0.0.1 at a free port, for tests of the S3 blob store.
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

// s3rver ships no types: the little used here.
interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverCtor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rverInstance;
const S3rver = createRequire(import.meta.url)("s3rver") as S3rverCtor;

export const BUCKET = "modelport-test";
/** s3rver's built-in account. */
export const CREDENTIALS = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };

export interface S3Server {
  endpoint: string;
  close(): Promise<void>;
}

let s3server: Promise<S3Server> | undefined;

/** One s3rver per test file, started on first use; close it in an `after` hook. */
export function startS3(): Promise<S3Server> {
  s3server ??= (async () => {
    const directory = await mkdtemp(join(tmpdir(), "modelport-s3rver-"));
    const server = new S3rver({
      address: "127.0.0.1",
      port: 0,
      silent: true,
      directory,
      configureBuckets: [{ name: BUCKET }],
    });
    const { port } = await server.run();
    return {
      endpoint: `http://127.0.0.1:${port}`,
      close: async () => {
        await server.close();
        await rm(directory, { recursive: true, force: true });
      },
    };
  })();
  return s3server;
}

export async function stopS3(): Promise<void> {
  if (s3server) await (await s3server).close();
  s3server = undefined;
}
