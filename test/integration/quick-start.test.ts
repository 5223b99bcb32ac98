// The README's quick start, as `npm start` runs it after the build: ensure-models builds the
// examples into examples/models/ when missing, then `modelport serve -c examples/modelport.yaml`
// must become ready with every bundled model, each answering its own route.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { postJson, REPO_ROOT, startReadyChild, stopStartedChildren } from "../helpers/server.js";

after(stopStartedChildren);

describe("quick start (npm start)", () => {
  it("builds the example models if missing and serves every one of them, ready", async () => {
    const ensure = spawnSync(process.execPath, [join(REPO_ROOT, "dist", "examples", "ensure-models.js")], {
      cwd: REPO_ROOT,
      encoding: "utf8",
    });
    assert.equal(ensure.status, 0, ensure.stderr);
    const server = await startReadyChild(["-c", join(REPO_ROOT, "examples", "modelport.yaml")]);
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as {
      models: Record<string, { ready: boolean }>;
    };
    assert.deepEqual(Object.keys(ready.models).sort(), [
      "churn",
      "churn-tree",
      "segment-mlp",
      "tiny-embed",
      "tiny-llama",
    ]);
    assert.ok(Object.values(ready.models).every((m) => m.ready));

    const tree = await postJson(`${server.url}/v1/models/churn-tree/predict`, {
      rows: [[3, 95, 4, 1, 0, 20]],
    });
    assert.equal(tree.status, 200);
    const chat = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny-llama",
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 4,
    });
    assert.equal(chat.status, 200, JSON.stringify(chat.body));
    assert.equal(chat.body.choices[0].message.role, "assistant");
    const embed = await postJson(`${server.url}/v1/embeddings`, {
      model: "tiny-embed",
      input: "the cat sat",
    });
    assert.equal(embed.status, 200, JSON.stringify(embed.body));
    assert.ok(embed.body.data[0].embedding.length > 0);
  });
});
