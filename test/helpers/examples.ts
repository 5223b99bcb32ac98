// The bundled examples (examples/modelport.yaml: an ONNX model, a TypeScript handler, a GGUF and
// an embeddings folder) staged in a folder of their own, and the requests that show each answers:
// for tests that serve them from an install other than this checkout.
import assert from "node:assert/strict";
import { cpSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { testModels } from "./models.js";
import { REPO_ROOT, waitReady } from "./server.js";
import { until } from "./until.js";

/** Copies the example config, handlers and built models into `dir`; returns the config's path. */
export async function stageExamples(dir: string): Promise<string> {
  mkdirSync(join(dir, "models"), { recursive: true });
  cpSync(join(REPO_ROOT, "examples", "modelport.yaml"), join(dir, "modelport.yaml"));
  cpSync(join(REPO_ROOT, "examples", "handlers"), join(dir, "handlers"), { recursive: true });
  cpSync(await testModels(), join(dir, "models"), { recursive: true });
  return join(dir, "modelport.yaml");
}

/**
 * Waits until the server at `url` listens (a refused connection until then), then until it is
 * ready, which it is only once every golden check passed; `output` is shown on a failure.
 */
export async function assertListensThenReady(url: string, output: () => string = () => ""): Promise<void> {
  const live = () =>
    fetch(`${url}/livez`).then(
      (r) => r.ok,
      () => false,
    );
  await until("the server to listen", live, 60_000);
  const ready = await waitReady(url, 180_000);
  assert.equal(ready.status, 200, `${JSON.stringify(ready.body)}\n${output().slice(-2000)}`);
}

/** One request to each kind of example model: the ONNX model, the handler, the GGUF, the embeddings. */
export async function assertServesExamples(url: string): Promise<void> {
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const onnx = await post("/v1/models/churn-tree/predict", { rows: [[3, 95, 4, 1, 0, 20]] });
  assert.equal(onnx.status, 200, JSON.stringify(onnx.body));
  const inputs = JSON.parse(
    readFileSync(join(REPO_ROOT, "examples", "handlers", "churn-handler.inputs.json"), "utf8"),
  );
  const handler = await post("/v1/models/churn/predict", inputs);
  assert.equal(handler.status, 200, JSON.stringify(handler.body));
  const text = await post("/v1/completions", { model: "tiny-llama", prompt: "hello", max_tokens: 3 });
  assert.equal(text.status, 200, JSON.stringify(text.body));
  const emb = await post("/v1/embeddings", { model: "tiny-embed", input: "hello cat" });
  assert.equal(emb.status, 200, JSON.stringify(emb.body));
  assert.equal(((emb.body.data as { embedding: number[] }[])[0]?.embedding.length ?? 0) > 0, true);
}
