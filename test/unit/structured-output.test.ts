// The JSON Schema subset a grammar enforces, the tool plan built from a request, an answer cut
// short inside its text, and the narrowed number rules.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { boundedNumbers } from "../../src/backends/llama-cpp/grammars.js";
import { ModelportError } from "../../src/errors.js";
import { grammarSchema, UnsupportedSchema } from "../../src/llm/json-schema-subset.js";
import { partialResponse, planStructured, readToolAnswer } from "../../src/llm/structured-output.js";

const unsupported = (schema: unknown, path: RegExp) =>
  assert.throws(
    () => grammarSchema(schema),
    (err: unknown) => err instanceof UnsupportedSchema && path.test(err.message),
  );

describe("grammarSchema", () => {
  it("takes what zod writes for common schemas (safe-integer bounds, typed enums, nullable, optional)", () => {
    const schema = z.toJSONSchema(
      z.object({
        name: z.string().max(20),
        age: z.number().int(),
        kind: z.enum(["a", "b"]),
        tags: z.array(z.string()).optional(),
        maybe: z.boolean().nullable(),
      }),
    );
    const out = grammarSchema(schema);
    assert.deepEqual(out, {
      type: "object",
      properties: {
        name: { type: "string", maxLength: 20 },
        age: { type: "integer" },
        kind: { enum: ["a", "b"] },
        tags: { type: "array", items: { type: "string" } },
        maybe: { type: ["boolean", "null"] },
      },
      additionalProperties: false,
    });
  });

  it("refuses by path and name what a grammar cannot enforce", () => {
    unsupported({ type: "integer", minimum: 0 }, /^schema\.minimum: 'minimum 0'/);
    unsupported({ type: "number", maximum: 1e300 }, /schema\.maximum/);
    unsupported(
      { type: "object", properties: { s: { type: "string", pattern: "^a" } } },
      /properties\.s\.pattern/,
    );
    unsupported({ type: "string", format: "email" }, /format "email"/);
    unsupported({ type: "array", uniqueItems: true }, /uniqueItems/);
    unsupported({ not: { type: "string" } }, /schema\.not/);
    unsupported({ allOf: [{ type: "string" }, { maxLength: 3 }] }, /allOf of several/);
    unsupported({ $ref: "https://example.com/x.json" }, /\$ref/);
    unsupported({ enum: [{ a: 1 }] }, /enum\[0\]/);
    unsupported(false, /false/);
  });

  it("maps anyOf to oneOf, nullable to a null branch, definitions to $defs at the root", () => {
    const out = grammarSchema({
      type: "object",
      properties: {
        a: { $ref: "#/definitions/Item" },
        b: { anyOf: [{ type: "string" }, { type: "integer" }] },
      },
      definitions: { Item: { type: "string", nullable: true, title: "dropped" } },
    });
    assert.deepEqual(out, {
      type: "object",
      properties: { a: { $ref: "#/$defs/Item" }, b: { oneOf: [{ type: "string" }, { type: "integer" }] } },
      $defs: { Item: { oneOf: [{ type: "string" }, { type: "null" }] } },
    });
  });
});

describe("planStructured and readToolAnswer", () => {
  const tools = [
    { name: "f", parameters: { type: "object", properties: { x: { type: "integer" } } } },
    { name: "g", parameters: { type: "object", properties: {} } },
  ];
  const messages = [{ role: "user" as const, content: "hi" }];

  it("a forced call: the envelope's calls only; a named one: that function once", () => {
    const forced = planStructured({ messages, tools, toolChoice: "required" });
    assert.equal(forced.tools, true);
    assert.deepEqual(Object.keys((forced.schema!.properties as object) ?? {}), ["tool_calls"]);
    const named = planStructured({ messages, tools, toolChoice: { name: "g" } });
    const calls = (named.schema!.properties as Record<string, Record<string, unknown>>).tool_calls!;
    assert.equal(calls.maxItems, 1);
    assert.deepEqual((calls.items as Record<string, Record<string, unknown>>).properties!.name, {
      const: "g",
    });
    // The instructions go into the first system message, or a new one.
    assert.equal(named.messages![0]!.role, "system");
    assert.match(named.messages![0]!.content, /"name":"g"/);
    assert.doesNotMatch(named.messages![0]!.content, /"name":"f"/);
  });

  it("auto: calls or a response; none: free text; the tool history becomes text", () => {
    const auto = planStructured({ messages, tools });
    assert.equal((auto.schema!.oneOf as unknown[]).length, 2);
    assert.deepEqual(planStructured({ messages, tools, toolChoice: "none" }), { tools: false, messages });
    const history = planStructured({
      messages: [
        ...messages,
        { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "f", arguments: '{"x":1}' }] },
        { role: "tool", content: "42", toolCallId: "c1" },
      ],
      tools,
    });
    const texts = history.messages!.map((m) => [m.role, m.content]);
    assert.deepEqual(texts.slice(2), [
      ["assistant", '{"tool_calls":[{"name":"f","arguments":{"x":1}}]}'],
      ["user", '{"tool_result":{"name":"f","content":"42"}}'],
    ]);
  });

  it("keeps two functions' definitions of the same name apart", () => {
    const withItem = (type: string) => ({
      type: "object",
      properties: { x: { $ref: "#/$defs/Item" } },
      $defs: { Item: { type } },
    });
    const plan = planStructured({
      messages,
      tools: [
        { name: "f", parameters: withItem("string") },
        { name: "g", parameters: withItem("integer") },
      ],
      toolChoice: "required",
    });
    assert.deepEqual(plan.schema!.$defs, {
      "tool0.Item": { type: "string" },
      "tool1.Item": { type: "integer" },
    });
    const items = (
      (plan.schema!.properties as Record<string, Record<string, unknown>>).tool_calls!.items as {
        oneOf: { properties: { arguments: { properties: { x: unknown } } } }[];
      }
    ).oneOf;
    assert.deepEqual(
      items.map((c) => c.properties.arguments.properties.x),
      [{ $ref: "#/$defs/tool0.Item" }, { $ref: "#/$defs/tool1.Item" }],
    );
  });

  it("refuses a schema feature with the request's parameter name", () => {
    assert.throws(
      () =>
        planStructured({
          messages,
          tools: [{ name: "f", parameters: { type: "string", pattern: "x" } }],
          toolChoice: "required",
        }),
      (err: unknown) =>
        err instanceof ModelportError && err.details?.param === "tools[0].function.parameters",
    );
  });

  it("reads calls (fresh ids, arguments as JSON text) or the response", () => {
    const calls = readToolAnswer('{"tool_calls": [{"name": "f", "arguments": {"x": 2}}]}', false);
    assert.equal(calls.toolCalls?.[0]?.name, "f");
    assert.equal(calls.toolCalls?.[0]?.arguments, '{"x":2}');
    assert.match(calls.toolCalls![0]!.id, /^call_/);
    assert.deepEqual(readToolAnswer('{"response": "hello"}', false), { text: "hello" });
    assert.deepEqual(readToolAnswer('{"response": {"a": 1}}', true), { text: '{"a":1}' });
    assert.deepEqual(readToolAnswer('{"tool_ca', false), { text: '{"tool_ca' });
  });

  it("partialResponse: the text of an answer cut inside its string, escapes decoded", () => {
    assert.equal(partialResponse('{"response": "a\\nb \\u0041\\"c'), 'a\nb A"c');
    assert.equal(partialResponse('{ "response":"done", '), "done");
    assert.equal(partialResponse('{"response": "cut in \\u00'), "cut in ");
    assert.equal(partialResponse('{"tool_calls": ['), undefined);
  });
});

describe("boundedNumbers", () => {
  it("narrows node-llama-cpp's number rules so every number parses finite", () => {
    const gbnf = [
      'root ::= "{" integer-number-rule "}"',
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
    ].join("\n");
    const out = boundedNumbers(gbnf).split("\n");
    assert.equal(out[0], 'root ::= "{" integer-number-rule "}"');
    assert.equal(out[1], 'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})');
    assert.match(out[2]!, /\[eE\] \[-\+\]\? \[0-9\]\{1,2\}\)\?$/);
  });
});
