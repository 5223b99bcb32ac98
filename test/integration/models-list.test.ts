// GET /v1/models keeps README's promise for every tensor model, in both of its lists: the OpenAI
// `data` entry and the native `models` entry carry the inputs, outputs, the model file's sha256
// (as a user's own sha256sum gives it), the load time and the memory the load added.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { stringify } from "yaml";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, REPO_ROOT, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let models: string;
const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

before(async () => {
  models = await testModels();
  const file = join(mkdtempSync(join(tmpdir(), "modelport-models-list-")), "modelport.yaml");
  writeFileSync(
    file,
    stringify({
      models: [
        { name: "churn-tree", path: join(models, "churn-tree.onnx") },
        { name: "segment-mlp", path: join(models, "segment-mlp.onnx"), placement: "process" },
        {
          name: "churn",
          backend: "custom",
          path: join(REPO_ROOT, "examples", "handlers", "churn-handler.ts"),
          options: { model: join(models, "churn-tree.onnx"), threshold: 0.5 },
        },
        { name: "tiny-llama", path: join(models, "tiny-llama.gguf") },
      ],
    }),
  );
  srv = await startInProcess({ file });
});

after(async () => {
  await srv?.close();
});

describe("GET /v1/models", () => {
  it("lists each tensor model with inputs, outputs, sha256, load time and memory in data and models", async () => {
    const list = (await (await fetch(`${srv.url}/v1/models`)).json()) as {
      data: Record<string, any>[];
      models: Record<string, any>[];
    };
    const files: Record<string, string> = {
      "churn-tree": join(models, "churn-tree.onnx"),
      "segment-mlp": join(models, "segment-mlp.onnx"),
      churn: join(REPO_ROOT, "examples", "handlers", "churn-handler.ts"),
    };
    assert.deepEqual(list.data.map((m) => m.id).sort(), ["churn", "churn-tree", "segment-mlp", "tiny-llama"]);
    for (const [name, file] of Object.entries(files)) {
      const entry = list.data.find((m) => m.id === name)!;
      const native = list.models.find((m) => m.name === name)!;
      const detail = (await (await fetch(`${srv.url}/v1/models/${name}`)).json()) as Record<string, any>;
      assert.equal(entry.kind, "tensor", name);
      for (const [where, m, sum] of [
        ["data", entry, entry.sha256],
        ["models", native, native.file?.sha256],
      ] as const) {
        assert.ok(
          m.inputs.length > 0 && m.inputs.every((s: any) => s.name && s.datatype && s.shape),
          `${where} ${name} inputs`,
        );
        assert.ok(m.outputs.length > 0, `${where} ${name} outputs`);
        assert.deepEqual(
          m.inputs,
          detail.inputs,
          `${where} ${name}: the inputs GET /v1/models/${name} gives`,
        );
        assert.deepEqual(m.outputs, detail.outputs, `${where} ${name}`);
        assert.equal(sum, sha256(file), `${where} ${name}: sha256 of ${file}`);
        assert.ok(m.load_ms > 0, `${where} ${name} load_ms ${m.load_ms}`);
        assert.ok(Number.isFinite(m.memory_bytes), `${where} ${name} memory_bytes ${m.memory_bytes}`);
      }
    }
    // A language model's entry stays in OpenAI's shape, with its context length.
    const llm = list.data.find((m) => m.id === "tiny-llama")!;
    assert.equal(llm.kind, "language");
    assert.equal(llm.inputs, undefined);
    assert.ok(llm.context_length > 0);
  });

  it("README says what the list holds", () => {
    const line = readFileSync(join(REPO_ROOT, "README.md"), "utf8")
      .split("\n")
      .find((l) => l.startsWith("curl localhost:8080/v1/models "));
    assert.match(line ?? "", /tensor model's inputs, outputs/);
  });
});
