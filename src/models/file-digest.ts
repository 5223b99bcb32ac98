// sha256 of a model file, streamed so large weights never sit in memory twice.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";

/** Resolves to the hex sha256 and byte size of `path`. */
export function fileDigest(path: string): Promise<{ sha256: string; bytes: number }> {
  return new Promise((resolve, reject) => {
    const hash = createHash("sha256");
    let bytes = 0;
    createReadStream(path)
      .on("data", (chunk) => {
        bytes += chunk.length;
        hash.update(chunk);
      })
      .on("error", reject)
      .on("end", () => resolve({ sha256: hash.digest("hex"), bytes }));
  });
}
