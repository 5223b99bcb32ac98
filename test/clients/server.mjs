// The modelport the client-library suite talks to: a `modelport serve` child on the project's
// Node (MODELPORT_SERVER_NODE, set by dist/test/run.js) serving two GGUFs with different
// tokenizers, tiny-llama (SentencePiece with byte fallback) and bpe-llama (byte-level BPE as
// GPT-2 and Llama 3 write it), and the tiny-embed embeddings model, all built by the project's
// own model builders (dist/ must be built first). Not a test file: the suite's files import it.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildBpeLlamas } from "../../dist/examples/build/models/bpe-llama.js";
import { writeLlamaArtifact } from "../../dist/examples/build/models/tiny-llama.js";
import { testModels } from "../../dist/test/helpers/models.js";
import { startChild, waitReady } from "../../dist/test/helpers/server.js";

/** The chat models every case runs on: one per tokenizer kind. */
export const CHAT_MODELS = ["tiny-llama", "bpe-llama"];
export const EMBED_MODEL = "tiny-embed";

/**
 * Builds the models, starts modelport on a free port with `extraConfig` (YAML lines after the
 * model list) and waits until it is ready.
 * @returns `{url, baseURL, output(), stop()}`; `baseURL` is `<url>/v1`, as the clients take it.
 * @throws AssertionError with the server's output when it does not become ready.
 */
export async function startModelport(name, extraConfig = []) {
  const dir = await testModels();
  for (const artifact of buildBpeLlamas())
    if (CHAT_MODELS.includes(artifact.name)) await writeLlamaArtifact(dir, artifact);
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    [
      "models:",
      ...CHAT_MODELS.flatMap((model) => [
        `  - name: ${model}`,
        `    path: ${model}.gguf`,
        "    llm: { sequences: 2, contextSize: 2048 }",
      ]),
      `  - name: ${EMBED_MODEL}`,
      `    path: ${EMBED_MODEL}`,
      ...extraConfig,
      "",
    ].join("\n"),
  );
  const server = await startChild(["-c", file]);
  const ready = await waitReady(server.url, 60_000);
  assert.equal(ready.status, 200, server.output().slice(-2000));
  return {
    url: server.url,
    baseURL: `${server.url}/v1`,
    output: () => server.output(),
    stop: () => server.stop("SIGKILL"),
  };
}
