// `npm run bench:structured`: do structured answers hold, and what do they cost? One `modelport
// serve` with tiny-llama, bpe-llama and sparse-llama (random weights, so the models themselves
// never keep to a format; three kinds of vocabulary). First the schema corpus
// (test/fixtures/schemas: zod 4, the openai SDK, pydantic 2, OpenAI's docs):
//   accepted:  each schema sent as a response format and as a tool's parameters (max_tokens 1);
//              the share answered 200, bar ≥ 95%;
//   answers:   ANSWERS generations (default 500) round the corpus and the three models,
//              alternating response format and forced tool call, temperature 1; each one must
//              validate against the schema as the client wrote it (the bench's own Ajv), or end
//              cut by max_tokens ("length"), or be a 422 MP_ERR_LLM_OUTPUT_INVALID: bar 100%.
// Then on tiny-llama COUNT sampled generations (temperature 1, seeds 1…COUNT, two at a time) of
// each kind:
//   json_schema:  response_format with a schema of strings, numbers, integers, enums, arrays,
//                 nullables and a nested object;
//   forced tools: tool_choice "required" with two functions;
//   free text:    the same chat with no format, for the cost.
// Every JSON answer and every call's arguments are parsed and validated with Ajv against the
// schema sent; the bar: 100% valid. Also the milliseconds per generated token of each kind (the
// grammar's cost), median over the requests.
// Not a test: numbers for docs/PERFORMANCE.md.
// Usage: node dist/bench/structured.js [--count N] [--answers N]
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Ajv } from "ajv";
import { buildBpeLlamas } from "../examples/build/models/bpe-llama.js";
import { writeLlamaArtifact } from "../examples/build/models/tiny-llama.js";
import { buildModels } from "../examples/build-models.js";
import { clientValidator, errorsText, schemaCorpus } from "../test/fixtures/schema-corpus.js";
import { machine } from "./report.js";
import { startModelportWithConfig } from "./servers.js";
import { round, Samples } from "./stats.js";

const { values } = parseArgs({
  options: { count: { type: "string", default: "200" }, answers: { type: "string", default: "500" } },
});
const count = Number(values.count);
const answers = Number(values.answers);
const MODELS = ["tiny-llama", "bpe-llama", "sparse-llama"];

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

type Ending = "valid" | "length" | "422 MP_ERR_LLM_OUTPUT_INVALID" | "broken";

/** One corpus request; "broken" is anything item 1 of docs/LLM.md#structured-output rules out. */
async function corpusAnswer(
  url: string,
  model: string,
  schema: Record<string, unknown>,
  tool: boolean,
  extra: Record<string, unknown>,
): Promise<{ ending: Ending; problem?: string }> {
  const body = {
    model,
    messages: [{ role: "user", content: "Fill in the form." }],
    ...extra,
    ...(tool
      ? {
          tools: [{ type: "function", function: { name: "fill", parameters: schema } }],
          tool_choice: "required",
        }
      : { response_format: { type: "json_schema", json_schema: { name: "form", schema, strict: true } } }),
  };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = (await res.json()) as {
    choices?: {
      message: { content: string | null; tool_calls?: { function: { arguments: string } }[] };
      finish_reason: string;
    }[];
    error?: { code: string; message: string };
  };
  if (res.status === 422 && answer.error?.code === "MP_ERR_LLM_OUTPUT_INVALID")
    return { ending: "422 MP_ERR_LLM_OUTPUT_INVALID" };
  const choice = answer.choices?.[0];
  if (!res.ok || !choice) return { ending: "broken", problem: answer.error?.message ?? `HTTP ${res.status}` };
  if (choice.finish_reason === "length") return { ending: "length" };
  const validate = clientValidator(schema);
  try {
    const values = tool
      ? (choice.message.tool_calls ?? []).map((c) => JSON.parse(c.function.arguments))
      : [JSON.parse(choice.message.content ?? "")];
    if (values.length === 0) return { ending: "broken", problem: `${choice.finish_reason} without a call` };
    for (const v of values) if (!validate(v)) return { ending: "broken", problem: errorsText(validate) };
    return { ending: "valid" };
  } catch (err) {
    return { ending: "broken", problem: (err as Error).message };
  }
}

async function corpusRows(url: string): Promise<Record<string, unknown>[]> {
  const corpus = schemaCorpus();
  let accepted = 0;
  const refused: string[] = [];
  for (const { file, schema } of corpus)
    for (const tool of [false, true]) {
      const { ending, problem } = await corpusAnswer(url, "tiny-llama", schema, tool, { max_tokens: 1 });
      if (ending === "length") accepted++;
      else refused.push(`${file}: ${problem ?? ending}`);
    }
  const rows: Record<string, unknown>[] = [
    {
      kind: "corpus accepted",
      schemas: corpus.length,
      requests: corpus.length * 2,
      accepted,
      share: round((100 * accepted) / (corpus.length * 2)),
      bar: "≥ 95%",
      ...(refused.length ? { refused: refused.slice(0, 5) } : {}),
    },
  ];
  console.log(JSON.stringify(rows[0]));
  const endings: Record<string, Record<Ending, number>> = {};
  const broken: string[] = [];
  for (let i = 0; i < answers; i += 2) {
    const batch = [i, i + 1].filter((n) => n < answers);
    const results = await Promise.all(
      batch.map((n) => {
        const model = MODELS[n % MODELS.length]!;
        const { schema } = corpus[n % corpus.length]!;
        return corpusAnswer(url, model, schema, Math.floor(n / corpus.length) % 2 === 1, {
          max_tokens: 300,
          temperature: 1,
          seed: n + 1,
        }).then((r) => ({ model, file: corpus[n % corpus.length]!.file, ...r }));
      }),
    );
    for (const r of results) {
      endings[r.model] ??= { valid: 0, length: 0, "422 MP_ERR_LLM_OUTPUT_INVALID": 0, broken: 0 };
      endings[r.model]![r.ending]++;
      if (r.ending === "broken") broken.push(`${r.model} ${r.file}: ${r.problem}`);
    }
  }
  const total = Object.values(endings).reduce(
    (a, e) => a + e.valid + e.length + e["422 MP_ERR_LLM_OUTPUT_INVALID"] + e.broken,
    0,
  );
  const brokenCount = Object.values(endings).reduce((a, e) => a + e.broken, 0);
  rows.push({
    kind: "corpus answers",
    answers: total,
    byModel: endings,
    validOrEndedAsDocumented: round((100 * (total - brokenCount)) / total),
    bar: "100%",
    ...(broken.length ? { firstBroken: broken.slice(0, 5) } : {}),
  });
  console.log(JSON.stringify(rows.at(-1)));
  return rows;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "modelport-bench-structured-"));
  await buildModels(dir);
  for (const artifact of buildBpeLlamas()) await writeLlamaArtifact(dir, artifact);
  const configFile = path.join(dir, "modelport.yaml");
  writeFileSync(
    configFile,
    [
      "models:",
      ...MODELS.map((m) => `  - {name: ${m}, path: ${path.join(dir, `${m}.gguf`)}, llm: {sequences: 2}}`),
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
    rows.push(...(await corpusRows(server.url)));
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
