// The translation of a /v1/responses body into chat's GenerateRequest (src/server/responses-request.ts):
// items to messages (instructions first, calls joined to the assistant turn before them, outputs
// as tool messages), the tools, tool choice and format in chat's terms, and the conversation's
// bounds counted over a previous response's items too.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isModelportError } from "../../src/errors.js";
import type { PromptLimits } from "../../src/server/openai-request.js";
import { chatMessages, generateRequest, parseResponsesRequest } from "../../src/server/responses-request.js";

const LIMITS: PromptLimits = {
  maxMessages: 4,
  maxStops: 4,
  maxStopChars: 100,
  maxChoices: 1,
  maxPromptBytes: 200,
};
const parse = (body: Record<string, unknown>) => parseResponsesRequest({ model: "m", ...body }, () => LIMITS);

function refused(fn: () => unknown, code: string, param: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isModelportError(err));
    assert.equal(err.code, code);
    assert.equal(err.details?.param, param);
    return true;
  });
}

describe("responses-request", () => {
  it("turns items into chat messages: instructions first, calls joined to their turn, outputs as tool messages", () => {
    const parsed = parse({
      instructions: "Be brief.",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "a" },
            { type: "input_text", text: "b" },
          ],
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "calling" }] },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call", call_id: "c2", name: "g", arguments: '{"x":1}' },
        { type: "function_call_output", call_id: "c1", output: "one" },
      ],
    });
    assert.deepEqual(chatMessages(parsed.items, parsed.body.instructions), [
      { role: "system", content: "Be brief." },
      { role: "user", content: "ab" },
      {
        role: "assistant",
        content: "calling",
        toolCalls: [
          { id: "c1", name: "f", arguments: "{}" },
          { id: "c2", name: "g", arguments: '{"x":1}' },
        ],
      },
      { role: "tool", content: "one", toolCallId: "c1" },
    ]);
  });

  it("a call after a user turn opens an assistant turn of its own", () => {
    const parsed = parse({ input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{}" }] });
    assert.deepEqual(chatMessages(parsed.items, undefined), [
      { role: "assistant", content: "", toolCalls: [{ id: "c", name: "f", arguments: "{}" }] },
    ]);
  });

  it("translates flat tools, tool_choice by name, json_schema format and sampling to chat's request", () => {
    const schema = { type: "object", properties: { n: { type: "integer" } } };
    const parsed = parse({
      input: "hi",
      tools: [{ type: "function", name: "f", parameters: schema }],
      tool_choice: { type: "function", name: "f" },
      text: { format: { type: "json_schema", name: "s", schema, strict: true } },
      max_output_tokens: 9,
      temperature: 0.5,
      top_p: 0.9,
      seed: 3,
      parallel_tool_calls: false,
    });
    assert.deepEqual(generateRequest(parsed, []), {
      maxTokens: 9,
      temperature: 0.5,
      topP: 0.9,
      seed: 3,
      tools: [{ name: "f", parameters: schema }],
      toolChoice: { name: "f" },
      parallelToolCalls: false,
      responseFormat: { type: "json_schema", name: "s", schema, strict: true },
      messages: [{ role: "user", content: "hi" }],
    });
    assert.deepEqual(parsed.tools, [
      { type: "function", name: "f", description: null, parameters: schema, strict: true },
    ]);
  });

  it("bounds the whole conversation, a previous response's items included", () => {
    const parsed = parse({ input: "x" });
    const prior = parse({ input: [1, 2, 3, 4].map((i) => ({ role: "user", content: String(i) })) }).items;
    refused(() => generateRequest(parsed, prior), "MP_ERR_REQUEST_INVALID", "input");
    const long = parse({ input: "y".repeat(150) }).items;
    refused(
      () => generateRequest(parse({ input: "z".repeat(60) }), long),
      "MP_ERR_LLM_CONTEXT_OVERFLOW",
      "input",
    );
  });

  it("refuses unserved features by name", () => {
    refused(
      () => parse({ input: "x", tools: [{ type: "file_search" }] }),
      "MP_ERR_REQUEST_INVALID",
      "tools[0].type",
    );
    refused(
      () => parse({ input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }),
      "MP_ERR_REQUEST_INVALID",
      "input[0].content[0].type",
    );
    refused(
      () => parse({ input: "x", tool_choice: { type: "web_search_preview" } }),
      "MP_ERR_REQUEST_INVALID",
      "tool_choice.type",
    );
    refused(
      () => parse({ input: "x", reasoning: { summary: "auto" } }),
      "MP_ERR_REQUEST_INVALID",
      "reasoning.summary",
    );
    refused(() => parse({ input: "x", conversation: "conv_1" }), "MP_ERR_REQUEST_INVALID", "conversation");
    refused(() => parse({ input: "x", metadata: { k: 1 } }), "MP_ERR_REQUEST_INVALID", "metadata.k");
    // Absent or null reasoning is fine.
    parse({ input: "x", reasoning: null });
    parse({ input: "x", reasoning: { effort: null } });
  });
});
