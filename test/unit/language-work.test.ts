// Language-model work as jobs, the pure parts: what a job stores and reads back, the endpoints a
// job may name, and how many jobs a language model runs at once.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ServedModel } from "../../src/catalogue/served-model.js";
import { llmSchema } from "../../src/config/schema.js";
import {
  checkEndpoint,
  endpointCapability,
  languageInput,
  languageJobConcurrency,
  readLanguageWork,
} from "../../src/jobs/language-work.js";

/** A model as languageJobConcurrency reads it: its backend and llm settings. */
const model = (backend: string, llm: Record<string, unknown>) =>
  ({ config: { backend, llm: llmSchema.parse(llm) } }) as unknown as ServedModel;

describe("language work", () => {
  it("stores {openai: {endpoint, body}} and reads it back; a tensor input is not language work", () => {
    const work = { endpoint: "/v1/completions" as const, body: { model: "m", prompt: "hi" } };
    const input = languageInput(work);
    assert.deepEqual(JSON.parse(input), { openai: work });
    assert.deepEqual(readLanguageWork(input), work);
    assert.equal(readLanguageWork(JSON.stringify({ rows: [[1, 2]] })), undefined);
    assert.equal(readLanguageWork(JSON.stringify({ inputs: { x: [1] } })), undefined);
  });

  it("takes the three served endpoints, refuses others and (for now) /v1/responses, naming `endpoint`", () => {
    for (const e of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings"])
      assert.equal(checkEndpoint(e), e);
    for (const bad of [undefined, 3, "/v1/images", "/v1/responses"]) {
      assert.throws(
        () => checkEndpoint(bad),
        (err: { code: string; details: { param: string } }) =>
          err.code === "MP_ERR_REQUEST_INVALID" && err.details.param === "endpoint",
      );
    }
    assert.equal(endpointCapability("/v1/chat/completions"), "chat");
    assert.equal(endpointCapability("/v1/completions"), "completion");
    assert.equal(endpointCapability("/v1/embeddings"), "embeddings");
  });

  it("runs one job fewer than the model's sequences (at least one), or llm.jobConcurrency", () => {
    assert.equal(languageJobConcurrency(model("llama-cpp", { sequences: 1 }), 4), 1);
    assert.equal(languageJobConcurrency(model("llama-cpp", { sequences: 2 }), 4), 1);
    assert.equal(languageJobConcurrency(model("llama-cpp", { sequences: 8 }), 4), 7);
    assert.equal(languageJobConcurrency(model("llama-cpp", { sequences: 8, jobConcurrency: 2 }), 4), 2);
    // A batched embeddings model has no sequences: jobs.concurrency workers.
    assert.equal(languageJobConcurrency(model("transformers", {}), 4), 4);
    assert.equal(languageJobConcurrency(model("transformers", { jobConcurrency: 1 }), 4), 1);
  });
});
