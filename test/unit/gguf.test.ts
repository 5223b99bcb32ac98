// The GGUF writer, the header reader and the metadata check that stands between a file and
// llama.cpp (which aborts the whole process on some missing keys), plus the tiny-llama build:
// deterministic bytes and a vocabulary SentencePiece can merge into whole words.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pino } from "pino";
import { encodeGguf, f32, str, u32 } from "../../examples/build/gguf-writer.js";
import {
  BOS,
  buildLlamaGguf,
  buildVocabulary,
  llamaMetadata,
  SPACE,
} from "../../examples/build/llama-model.js";
import { buildTinyLlama, TINY_LLAMA } from "../../examples/build/models/tiny-llama.js";
import { GgmlType, llamaMetadataProblems, readGgufHeader } from "../../src/backends/llama-cpp/gguf-file.js";
import { createLanguageModel } from "../../src/catalogue/model-factory.js";
import { type LanguageModelConfig, llmSchema } from "../../src/config/schema.js";

const dir = mkdtempSync(join(tmpdir(), "modelport-gguf-"));

function write(name: string, bytes: Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

describe("GGUF writer and reader", () => {
  it("round-trips typed metadata and the tensor table, with 32-byte aligned data", async () => {
    const meta = new Map([
      ["general.architecture", str("test")],
      ["a.u32", u32(7)],
      ["a.f32", f32(0.5)],
      ["a.bool", { type: "bool", value: true } as const],
      ["a.strings", { type: "string[]", value: ["x", "ü", ""] } as const],
      ["a.ints", { type: "i32[]", value: [-1, 2] } as const],
    ]);
    const t1 = Float32Array.from([1, 2, 3]);
    const t2 = Float32Array.from([4, 5, 6, 7, 8, 9]);
    const bytes = encodeGguf(meta, [
      { name: "t1", dims: [3], data: t1 },
      { name: "t2", dims: [3, 2], data: t2 },
    ]);
    const h = await readGgufHeader(write("round-trip.gguf", bytes));
    assert.equal(h.version, 3);
    assert.equal(h.metadata.get("a.u32"), 7);
    assert.equal(h.metadata.get("a.f32"), 0.5);
    assert.equal(h.metadata.get("a.bool"), true);
    assert.deepEqual(h.metadata.get("a.strings"), ["x", "ü", ""]);
    assert.deepEqual(h.metadata.get("a.ints"), [-1, 2]);
    assert.deepEqual(
      h.tensors.map((t) => [t.name, t.dims, t.type, t.offset]),
      [
        ["t1", [3], GgmlType.F32, 0],
        ["t2", [3, 2], GgmlType.F32, 32],
      ],
    );
    assert.equal(h.dataOffset % 32, 0);
    const data = new Float32Array(bytes.buffer, bytes.byteOffset + h.dataOffset + 32, 6);
    assert.deepEqual([...data], [...t2]);
  });

  it("refuses a tensor whose data does not fill its dims", () => {
    assert.throws(
      () => encodeGguf(new Map(), [{ name: "t", dims: [2, 2], data: new Float32Array(3) }]),
      /needs 4 values/,
    );
  });

  it("reports files that are not GGUF", async () => {
    await assert.rejects(
      readGgufHeader(write("not.gguf", Buffer.from("ONNX and more bytes"))),
      /not a GGUF file/,
    );
    const truncated = encodeGguf(new Map([["general.name", str("x".repeat(100))]]), []).subarray(0, 40);
    await assert.rejects(readGgufHeader(write("short.gguf", truncated)), /past the end/);
  });
});

describe("llama metadata check", () => {
  const spec = { ...TINY_LLAMA, layers: 1 };
  const { gguf } = buildLlamaGguf(spec);

  it("passes tiny-llama", async () => {
    const h = await readGgufHeader(write("ok.gguf", gguf));
    assert.deepEqual(llamaMetadataProblems(h), []);
  });

  it("names each missing or inconsistent key, including the two that abort llama.cpp", async () => {
    const { weights } = buildLlamaGguf(spec);
    const meta = llamaMetadata(spec, weights.vocab);
    meta.delete("llama.feed_forward_length");
    meta.delete("llama.attention.head_count");
    meta.set("llama.embedding_length", u32(30));
    meta.set("tokenizer.ggml.eos_token_id", u32(99_999));
    const h = await readGgufHeader(
      write(
        "broken.gguf",
        encodeGguf(meta, [{ name: "token_embd.weight", dims: [2], data: new Float32Array(2) }]),
      ),
    );
    const problems = llamaMetadataProblems(h);
    assert.ok(problems.includes("llama.feed_forward_length is missing"), problems.join("\n"));
    assert.ok(problems.includes("llama.attention.head_count is missing"));
    assert.ok(problems.some((p) => p.startsWith("tokenizer.ggml.eos_token_id 99999 is outside")));
    assert.ok(problems.some((p) => p.startsWith("tensor token_embd.weight has dims [2]")));
  });

  it("keeps such a file away from llama.cpp: the model fails with the reason and the process lives", async () => {
    const { weights } = buildLlamaGguf(spec);
    const meta = llamaMetadata(spec, weights.vocab);
    meta.delete("llama.feed_forward_length");
    const path = write(
      "no-ffn.gguf",
      encodeGguf(meta, [{ name: "x", dims: [1], data: new Float32Array(1) }]),
    );
    const config: LanguageModelConfig = {
      name: "no-ffn",
      backend: "llama-cpp",
      path,
      version: "1",
      threads: 1,
      limits: { maxBodyBytes: 1024, maxBatchRows: 1, maxQueueRows: 1, timeoutMs: 1000 },
      llm: llmSchema.parse({ contextSize: 256, sequences: 1, maxWaiting: 0 }),
      options: {},
    };
    const model = createLanguageModel(config, { log: pino({ level: "silent" }) });
    await model.start();
    const s = model.status();
    assert.equal(s.state, "failed");
    assert.equal(s.code, "MP_ERR_MODEL_LOAD_FAILED");
    assert.match(s.reason ?? "", /llama\.feed_forward_length is missing/);
    await model.close();
  });
});

describe("tiny-llama", () => {
  it("builds byte-identical files with a golden text from the reference forward pass", () => {
    const a = buildTinyLlama();
    const b = buildTinyLlama();
    assert.ok(a.gguf.equals(b.gguf));
    assert.deepEqual(a.golden, b.golden);
    assert.equal(a.golden?.max_tokens, 12);
    assert.ok((a.golden?.text.split(" ").length ?? 0) > 3);
  });

  it("has byte fallback and every left prefix of each word as a piece", () => {
    const v = buildVocabulary(["stream"]);
    assert.equal(v.pieces[BOS], "<s>");
    for (let b = 0; b < 256; b++)
      assert.ok(v.ids.has(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
    for (const p of [
      "s",
      "t",
      SPACE,
      `${SPACE}s`,
      `${SPACE}st`,
      `${SPACE}str`,
      `${SPACE}stre`,
      `${SPACE}strea`,
      `${SPACE}stream`,
    ])
      assert.ok(v.ids.has(p), p);
    // Longer pieces score higher, so merges build the whole word.
    assert.ok(v.scores[v.ids.get(`${SPACE}stream`)!]! > v.scores[v.ids.get(`${SPACE}strea`)!]!);
  });
});
