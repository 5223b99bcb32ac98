// sha256 of a model file, streamed so large weights never sit in memory twice. A model folder
// (the transformers backend's Hugging Face layout) gets one digest over all its files, so a
// swapped tokenizer is caught as surely as swapped weights.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";

function streamDigest(path: string): Promise<{ sha256: string; bytes: number }> {
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

/**
 * Resolves to the hex sha256 and byte size of `path`. For a folder: sha256 over the sorted lines
 * "<relative path with '/'>\t<sha256 of the file>\n" of every file in it, and the total size.
 */
export async function fileDigest(path: string): Promise<{ sha256: string; bytes: number }> {
  if (!(await stat(path)).isDirectory()) return streamDigest(path);
  const entries = await readdir(path, { recursive: true, withFileTypes: true });
  const files = entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .sort();
  const hash = createHash("sha256");
  let bytes = 0;
  for (const file of files) {
    const d = await streamDigest(file);
    bytes += d.bytes;
    hash.update(`${relative(path, file).split(sep).join("/")}\t${d.sha256}\n`);
  }
  return { sha256: hash.digest("hex"), bytes };
}
