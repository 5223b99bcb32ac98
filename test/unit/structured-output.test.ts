// JSON Schemas as grammars (what is held, what is left to validation, what is refused), client
// schemas normalized and embedded, the tool plan built from a request, and an answer cut short
// inside its text.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { z } from "zod";
import { ModelportError } from "../../src/errors.js";
import { schemaGrammar, UnsupportedSchema } from "../../src/llm/schema-grammar.js";
import { embed, normalizeSchema } from "../../src/llm/schema-normalize.js";
import { partialResponse, planStructured, readToolAnswer } from "../../src/llm/structured-output.js";

const unsupported = (schema: unknown, path: RegExp) =>
  assert.throws(
    () => schemaGrammar(normalizeSchema(schema)),
    (err: unknown) => err instanceof UnsupportedSchema && path.test(err.message),
  );

describe("schemaGrammar", () => {
  it("takes what zod writes: ranges, formats with their patterns, nullable, optional, records", () => {
    const schema = z.toJSONSchema(
      z.object({
        name: z.string().max(20),
        age: z.number().int().min(0).max(120),
        score: z.number().min(0).max(1),
        email: z.email(),
        id: z.uuid(),
        at: z.iso.datetime(),
        kind: z.enum(["a", "b"]),
        tags: z.array(z.string()).min(1).max(3).optional(),
        maybe: z.boolean().nullable(),
        extra: z.record(z.string(), z.number()),
      }),
    );
    const g = schemaGrammar(normalizeSchema(schema));
    assert.match(g.gbnf, /^root ::= /m);
    // The pattern zod adds beside a format is checked by validation, not by the grammar.
    assert.equal(g.exact, false);
    const exact = schemaGrammar(
      normalizeSchema(z.toJSONSchema(z.object({ n: z.number().int().min(0).max(120) }))),
    );
    assert.equal(exact.exact, true);
    // 0…120: one digit, two digits, then 100…120.
    assert.match(exact.gbnf, /\[0-9\] \| \[1-9\] \[0-9\] \| "1" \( \[0-1\] \[0-9\] \| "2" \( "0" \) \)/);
  });

  it("refuses by path and name what neither a grammar nor validation can serve", () => {
    unsupported({ type: "integer", minimum: 5, maximum: 3 }, /^schema: an integer range with no integer/);
    unsupported(
      { type: "object", properties: { s: { type: "string", pattern: "^(?=a)" } } },
      /properties\.s\.pattern: the pattern .*lookaround/,
    );
    unsupported({ type: "string", pattern: "\\bword" }, /word boundary/);
    unsupported({ $ref: "https://example.com/x.json" }, /\$ref: the reference/);
    unsupported({ type: "object", properties: { n: { $ref: "#" } }, required: ["n"] }, /no way out/);
    unsupported(false, /false/);
  });

  it("leaves to validation what a grammar cannot say", () => {
    for (const schema of [
      { type: "array", items: { type: "integer" }, uniqueItems: true },
      { type: "integer", multipleOf: 5 },
      { type: "number", exclusiveMinimum: 0 },
      { not: { type: "string" } },
      { allOf: [{ type: "string" }, { maxLength: 3 }] },
    ])
      assert.equal(schemaGrammar(normalizeSchema(schema)).exact, false, JSON.stringify(schema));
  });
});

describe("normalizeSchema and embed", () => {
  it("nullable becomes a null branch, draft-07 tuples prefixItems, references move under a prefix", () => {
    assert.deepEqual(normalizeSchema({ type: "string", nullable: true }), {
      anyOf: [{ type: "string" }, { type: "null" }],
    });
    assert.deepEqual(
      normalizeSchema({ type: "array", items: [{ type: "string" }], additionalItems: false }),
      {
        type: "array",
        prefixItems: [{ type: "string" }],
        items: false,
      },
    );
    const { schema, defs } = embed(
      {
        type: "object",
        properties: { a: { $ref: "#/definitions/Item" }, self: { $ref: "#" } },
        definitions: { Item: { type: "string" } },
      },
      "t0.",
    );
    assert.deepEqual(schema, {
      type: "object",
      properties: { a: { $ref: "#/$defs/t0.Item" }, self: { $ref: "#/$defs/t0.root" } },
    });
    assert.deepEqual(Object.keys(defs).sort(), ["t0.Item", "t0.root"]);
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
    assert.equal((auto.schema!.anyOf as unknown[]).length, 2);
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
        anyOf: { properties: { arguments: { properties: { x: unknown } } } }[];
      }
    ).anyOf;
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
          tools: [{ name: "f", parameters: { type: "string", pattern: "(?<=a)x" } }],
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
