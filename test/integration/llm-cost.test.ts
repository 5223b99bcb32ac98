// Cost of a llama.cpp model end to end (docs/Cost.md#llamacpp-models): a real listening server
// serving the tiny-llama GGUF with pricePerHour and per-million token prices, two keys sending
// chat and completion requests at once (streamed and not) on two sequences. /metrics' cost of
// the model is the sum over its requests (machine time × price + tokens × prices, the tokens
// exact), the keys' shares of the machine time add up to the model's, /v1/models and
// `modelport cost` show the figures, each key's usage shows its own share only, and a job is
// counted at the model's batchPriceFactor.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { parsePrometheus } from "../../src/cli/cost.js";
import { createKey } from "../../src/tenants/key-file.js";
import { testModels } from "../helpers/models.js";
import { CLI, type InProcessServer, postJson, startInProcess } from "../helpers/server.js";
import { until } from "../helpers/until.js";

const run = promisify(execFile);

const PRICE_PER_HOUR = 36; // $0.01 per second of machine time
const PRICE_IN = 100; // per million prompt tokens
const PRICE_OUT = 300; // per million completion tokens
const TREE_PRICE_PER_HOUR = 7.2;
const TREE_BATCH_FACTOR = 0.5;

let server: InProcessServer;
const keys: Record<string, string> = {};
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/** One model's (or one key's) figures from /metrics, read with an admin key. */
async function figures(model: string, key?: string) {
  const text = await (await fetch(`${server.url}/metrics`, { headers: bearer(keys.ops!) })).text();
  const samples = parsePrometheus(text).filter(
    (s) => s.labels.model === model && (key === undefined || s.labels.key === key),
  );
  const value = (name: string, kind?: string) =>
    samples
      .filter((s) => s.name === name && (kind === undefined || s.labels.kind === kind))
      .reduce((sum, s) => sum + s.value, 0);
  return key === undefined
    ? {
        requests: value("modelport_cost_requests_total"),
        seconds: value("modelport_cost_compute_seconds_total"),
        dollars: value("modelport_cost_dollars_total"),
        input: value("modelport_cost_tokens_total", "input"),
        output: value("modelport_cost_tokens_total", "output"),
      }
    : {
        requests: value("modelport_key_requests_total"),
        seconds: value("modelport_key_compute_seconds_total"),
        dollars: value("modelport_key_cost_dollars_total"),
        input: value("modelport_key_tokens_total", "prompt"),
        output: value("modelport_key_tokens_total", "completion"),
      };
}

type Figures = Awaited<ReturnType<typeof figures>>;
const minus = (a: Figures, b: Figures): Figures => ({
  requests: a.requests - b.requests,
  seconds: a.seconds - b.seconds,
  dollars: a.dollars - b.dollars,
  input: a.input - b.input,
  output: a.output - b.output,
});
const priced = (f: { seconds: number; input: number; output: number }) =>
  (f.seconds / 3600) * PRICE_PER_HOUR + (f.input * PRICE_IN + f.output * PRICE_OUT) / 1e6;
const near = (a: number, b: number, what: string) =>
  assert.ok(Math.abs(a - b) <= 1e-9 + 1e-9 * Math.abs(b), `${what}: ${a} ≈ ${b}`);

/** A chat answer, not streamed: its usage. */
async function chat(key: string, content: string) {
  const res = await postJson(
    `${server.url}/v1/chat/completions`,
    { model: "tiny-llama", messages: [{ role: "user", content }], max_tokens: 12 },
    bearer(key),
  );
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.usage as { prompt_tokens: number; completion_tokens: number };
}

/** A streamed completion with its usage chunk. */
async function streamed(key: string, prompt: string) {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(key) },
    body: JSON.stringify({
      model: "tiny-llama",
      prompt,
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.match(text, /data: \[DONE\]/);
  const chunks = text
    .split("\n")
    .filter((l) => l.startsWith("data: {"))
    .map((l) => JSON.parse(l.slice(6)) as { usage?: { prompt_tokens: number; completion_tokens: number } });
  const usage = chunks.find((c) => c.usage)?.usage;
  assert.ok(usage, text);
  return usage;
}

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-llm-cost-"));
  const keysFile = join(dir, "keys.yaml");
  keys.alice = createKey(keysFile, "alice", { models: ["tiny-llama", "churn-tree"] }).key;
  keys.bob = createKey(keysFile, "bob", { models: ["tiny-llama"] }).key;
  keys.ops = createKey(keysFile, "ops", { role: "admin" }).key;
  const models = await testModels();
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  keys: ${keysFile}`,
      "  logLevel: warn",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      "  - name: tiny-llama",
      `    path: ${join(models, "tiny-llama.gguf")}`,
      "    llm: { sequences: 2, maxWaiting: 8, contextSize: 2048 }",
      `    pricePerHour: ${PRICE_PER_HOUR}`,
      `    pricePerMillionInputTokens: ${PRICE_IN}`,
      `    pricePerMillionOutputTokens: ${PRICE_OUT}`,
      "  - name: churn-tree",
      `    path: ${join(models, "churn-tree.onnx")}`,
      `    pricePerHour: ${TREE_PRICE_PER_HOUR}`,
      `    batchPriceFactor: ${TREE_BATCH_FACTOR}`,
      "",
    ].join("\n"),
  );
  server = await startInProcess({ file, env: {} });
});

after(async () => {
  await server?.close();
});

describe("cost of a llama.cpp model", () => {
  it("counts machine time and tokens: /metrics is the sum over requests, split among concurrent keys", async () => {
    const model0 = await figures("tiny-llama");
    // The golden check ran through the meter: one request, already priced.
    assert.equal(model0.requests, 1);
    near(model0.dollars, priced(model0), "the golden check's cost");
    // Two keys at once on two sequences: their generations overlap and share the machine time.
    const started = performance.now();
    const [a, b] = await Promise.all([
      Promise.all([
        chat(keys.alice!, "hello there"),
        streamed(keys.alice!, "once upon a time"),
        chat(keys.alice!, "what is a model server"),
      ]),
      Promise.all([streamed(keys.bob!, "the quick brown fox"), chat(keys.bob!, "tell me a story")]),
    ]);
    const sum = (us: { prompt_tokens: number; completion_tokens: number }[]) => ({
      input: us.reduce((s, u) => s + u.prompt_tokens, 0),
      output: us.reduce((s, u) => s + u.completion_tokens, 0),
    });
    const elapsedMs = performance.now() - started;
    const tokensA = sum(a);
    const tokensB = sum(b);
    // Usage per key is recorded once each answer is sent: wait until both keys have all theirs.
    await until("usage of every request", async () => {
      const [fa, fb] = await Promise.all([figures("tiny-llama", "alice"), figures("tiny-llama", "bob")]);
      return fa.requests === 3 && fb.requests === 2;
    });
    const model = minus(await figures("tiny-llama"), model0);
    const alice = await figures("tiny-llama", "alice");
    const bob = await figures("tiny-llama", "bob");
    assert.equal(model.requests, 5);
    // Tokens are counted exactly, and priced exactly.
    assert.equal(model.input, tokensA.input + tokensB.input);
    assert.equal(model.output, tokensA.output + tokensB.output);
    assert.deepEqual([alice.input, alice.output], [tokensA.input, tokensA.output]);
    assert.deepEqual([bob.input, bob.output], [tokensB.input, tokensB.output]);
    // The model's machine time is its requests' shares, summed; each key's dollars are its share's.
    assert.ok(alice.seconds > 0 && bob.seconds > 0, JSON.stringify({ alice, bob }));
    near(alice.seconds + bob.seconds, model.seconds, "the keys' machine time");
    // Overlapping generations share the time they ran together instead of each counting all of it:
    // the model was busy for no longer than the burst took (wall time, counted once).
    assert.ok(model.seconds * 1000 <= elapsedMs, `${model.seconds * 1000} ms within ${elapsedMs} ms`);
    near(alice.dollars, priced(alice), "alice's dollars");
    near(bob.dollars, priced(bob), "bob's dollars");
    near(model.dollars, priced(model), "the model's dollars");
    near(alice.dollars + bob.dollars, model.dollars, "the keys' dollars");
  });

  it("GET /v1/models and /v1/models/tiny-llama show the cost; `modelport cost` prints it", async () => {
    const total = await figures("tiny-llama");
    const list = (await (await fetch(`${server.url}/v1/models`, { headers: bearer(keys.ops!) })).json()) as {
      data: {
        id: string;
        cost?: { requests: number; dollars: number; inputTokens: number; prices: object };
      }[];
    };
    const listed = list.data.find((m) => m.id === "tiny-llama")?.cost;
    assert.ok(listed, JSON.stringify(list.data));
    assert.equal(listed.requests, total.requests);
    near(listed.dollars, total.dollars, "/v1/models dollars");
    assert.equal(listed.inputTokens, total.input);
    assert.deepEqual(listed.prices, {
      pricePerHour: PRICE_PER_HOUR,
      pricePerMillionInputTokens: PRICE_IN,
      pricePerMillionOutputTokens: PRICE_OUT,
    });
    const one = (await (
      await fetch(`${server.url}/v1/models/tiny-llama`, { headers: bearer(keys.ops!) })
    ).json()) as { cost: { dollars: number; computeMs: number; outputTokens: number } };
    near(one.cost.dollars, total.dollars, "/v1/models/tiny-llama dollars");
    near(one.cost.computeMs, total.seconds * 1000, "/v1/models/tiny-llama compute");
    assert.equal(one.cost.outputTokens, total.output);

    const env = { ...process.env, MODELPORT_API_KEY: keys.ops! };
    const json = JSON.parse(
      (await run(process.execPath, [CLI, "cost", server.url, "--json"], { env })).stdout,
    ) as {
      models: {
        model: string;
        requests: number;
        dollars: number;
        inputTokens: number;
        outputTokens: number;
      }[];
    };
    const row = json.models.find((m) => m.model === "tiny-llama");
    assert.ok(row, JSON.stringify(json));
    assert.equal(row.requests, total.requests);
    near(row.dollars, total.dollars, "`cost --json` dollars");
    assert.deepEqual([row.inputTokens, row.outputTokens], [total.input, total.output]);
    const table = (await run(process.execPath, [CLI, "cost", server.url], { env })).stdout;
    const line = table.split("\n").find((l) => l.startsWith("tiny-llama"));
    assert.ok(line, table);
    const tokensPerRequest = ((total.input + total.output) / total.requests).toFixed(1);
    assert.match(line, new RegExp(`\\s${tokensPerRequest.replace(".", "\\.")}\\s+\\$0\\.\\d+$`));
    assert.doesNotMatch(table, /\de-\d/, "no dollar amount in exponent notation");
  });

  it("GET /v1/usage: each key sees its own tokens and dollars, not another's", async () => {
    const own = (await (
      await fetch(`${server.url}/v1/usage?group_by=key,model`, { headers: bearer(keys.alice!) })
    ).json()) as {
      data: {
        key: string;
        model: string;
        prompt_tokens: number;
        completion_tokens: number;
        dollars: number;
      }[];
    };
    assert.deepEqual(
      own.data.map((r) => r.key),
      ["alice"],
    );
    const alice = await figures("tiny-llama", "alice");
    const row = own.data.find((r) => r.model === "tiny-llama")!;
    assert.equal(row.prompt_tokens, alice.input);
    assert.equal(row.completion_tokens, alice.output);
    near(row.dollars, alice.dollars, "alice's usage dollars");
    const everyone = (await (
      await fetch(`${server.url}/v1/usage?group_by=key,model`, { headers: bearer(keys.ops!) })
    ).json()) as { data: { key: string; model: string; dollars: number }[] };
    const bob = everyone.data.find((r) => r.key === "bob" && r.model === "tiny-llama");
    assert.ok(bob && bob.dollars > 0 && Math.abs(bob.dollars - row.dollars) > 0, JSON.stringify(everyone));
  });

  it("a job is counted at the model's batchPriceFactor", async () => {
    const job = await postJson(
      `${server.url}/v1/models/churn-tree/jobs`,
      { rows: [[3, 95, 4, 1, 0, 20]] },
      bearer(keys.alice!),
    );
    assert.equal(job.status, 202, JSON.stringify(job.body));
    await until("the job's usage", async () => (await figures("churn-tree", "alice")).requests === 1);
    const used = await figures("churn-tree", "alice");
    assert.ok(used.seconds > 0);
    near(used.dollars, (used.seconds / 3600) * TREE_PRICE_PER_HOUR * TREE_BATCH_FACTOR, "the job's dollars");
  });
});
