// `npm run bench:structured`: do structured answers hold, and what do they cost? One `modelport
// serve` with tiny-llama (random weights, so the model itself never keeps to a format). COUNT
// sampled generations (temperature 1, seeds 1…COUNT, two at a time) of each kind:
//   json_schema:  response_format with a schema of strings, numbers, integers, enums, arrays,
//                 nullables and a nested object;
//   forced tools: tool_choice "required" with two functions;
//   free text:    the same chat with no format, for the cost.
// Every JSON answer and every call's arguments are parsed and validated with Ajv against the
// schema sent; the bar: 100% valid. Also the milliseconds per generated token of each kind (the
// grammar's cost), median over the requests.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/structured.js [--count N]
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Ajv } from "ajv";
import { buildModels } from "../examples/build-models.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

const { values } = parseArgs({ options: { count: { type: "string", default: "200" } } });
const count = Number(values.count);

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 30 },
    age: { type: "integer" },
    score: { type: "number" },
    role: { enum: ["admin", "user", "guest"] },
    tags: { type: "array", items: { type: "string", maxLength: 10 }, maxItems: 4 },
    manager: { anyOf: [{ type: "string", maxLength: 20 }, { type: "null" }] },
    address: {
      type: "object",
      properties: { city: { type: "string", maxLength: 20 }, zip: { type: "string", maxLength: 8 } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
  },
  required: ["name", "age", "score", "role", "tags", "manager", "address"],
  additionalProperties: false,
};

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", maxLength: 24 },
          days: { type: "integer" },
          unit: { enum: ["c", "f"] },
        },
        required: ["city", "days", "unit"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
        additionalProperties: false,
      },
    },
  },
];

type Kind = "json_schema" | "forced tools" | "free text";

const ajv = new Ajv({ strict: false });
const validPerson = ajv.compile(person);
const validArgs = new Map(tools.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

interface Outcome {
  valid: boolean;
  problem?: string;
  msPerToken: number;
}

function check(
  kind: Kind,
  message: { content: string | null; tool_calls?: { function: { name: string; arguments: string } }[] },
): string | undefined {
  try {
    if (kind === "json_schema") {
      const value = JSON.parse(message.content ?? "");
      return validPerson(value) ? undefined : ajv.errorsText(validPerson.errors);
    }
    if (kind === "forced tools") {
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) return "no tool call";
      for (const c of calls) {
        const validate = validArgs.get(c.function.name);
        if (!validate) return `unknown tool ${c.function.name}`;
        if (!validate(JSON.parse(c.function.arguments))) return ajv.errorsText(validate.errors);
      }
    }
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

async function generate(url: string, kind: Kind, seed: number): Promise<Outcome> {
  const body = {
    model: "tiny-llama",
    messages: [{ role: "user", content: "Describe a person, or call a tool." }],
    max_tokens: 400,
    temperature: 1,
    seed,
    ...(kind === "json_schema"
      ? {
          response_format: {
            type: "json_schema",
            json_schema: { name: "person", schema: person, strict: true },
          },
        }
      : kind === "forced tools"
        ? { tools, tool_choice: "required" }
        : {}),
  };
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as {
    choices?: {
      message: { content: string | null; tool_calls?: { function: { name: string; arguments: string } }[] };
      finish_reason: string;
    }[];
    usage?: { completion_tokens: number };
    error?: { message: string };
  };
  const ms = performance.now() - started;
  const msPerToken = ms / Math.max(1, answer.usage?.completion_tokens ?? 1);
  const choice = answer.choices?.[0];
  if (!res.ok || !choice)
    return { valid: false, problem: answer.error?.message ?? `HTTP ${res.status}`, msPerToken };
  if (kind !== "free text" && choice.finish_reason === "length")
    return { valid: false, problem: "cut at max_tokens", msPerToken };
  const problem = check(kind, choice.message);
  return { valid: problem === undefined, ...(problem ? { problem } : {}), msPerToken };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-structured-"));
  await buildModels(dir);
  const configFile = path.join(dir, "modelport.yaml");
  writeFileSync(
    configFile,
    [
      "models:",
      `  - {name: tiny-llama, path: ${path.join(dir, "tiny-llama.gguf")}, llm: {sequences: 2}}`,
      "",
    ].join("\n"),
  );
  const server = await startModelportWithConfig({
    name: "modelport",
    configFile,
    shownConfigFile: "<tmp>/modelport.yaml",
    modelName: "tiny-llama",
    logLevel: "warn",
  });
  const rows: Record<string, unknown>[] = [];
  try {
    for (const kind of ["json_schema", "forced tools", "free text"] as Kind[]) {
      const outcomes: Outcome[] = [];
      // Two at a time: the model's two sequences.
      for (let seed = 1; seed <= count; seed += 2) {
        const batch = [seed, seed + 1].filter((s) => s <= count);
        outcomes.push(...(await Promise.all(batch.map((s) => generate(server.url, kind, s)))));
      }
      const perToken = new Samples();
      for (const o of outcomes) perToken.add(o.msPerToken);
      const invalid = outcomes.filter((o) => !o.valid);
      rows.push({
        kind,
        generations: outcomes.length,
        valid: outcomes.length - invalid.length,
        msPerTokenP50: round(perToken.percentiles([50])[0]!),
        ...(invalid.length ? { firstProblems: invalid.slice(0, 3).map((o) => o.problem) } : {}),
      });
      console.log(JSON.stringify(rows.at(-1)));
    }
  } finally {
    await server.child.stop(2000);
  }
  console.log(
    JSON.stringify({ date: new Date().toISOString(), machine: machine(), command: server.command }, null, 2),
  );
}

await main();
