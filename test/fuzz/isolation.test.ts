// Fuzzes tenant isolation (docs/Multi-tenant.md, "Who can see what") on a `modelport serve`
// process with a key file whose client keys get random model scopes from the run's seed, an admin
// key and a metrics key. Each case sends one request of any surface (native, OIP, OpenAI, jobs,
// management, listings, /metrics, /readyz, /openapi.json, /docs, /v1/usage, gRPC) as a random key
// to a random model. The oracle: a key never learns of, spends from or changes anything outside
// its scope.
// - No answer (body or header) names a model outside the key's scope or another key, unless the
//   request named it itself; then the answer is the one an unknown model of a name as long gets,
//   to the byte (request ids aside).
// - Another key's job is answered as a job that does not exist, on every job route.
// - After the run: usage, the per-key metrics and the capture files hold only (key, model) pairs
//   the key may use; every model is still loaded (no client changed anything).
// Shared memory: random keys register, read and unregister random objects; an object once
// registered by a key is never registered by another, and no key holds more than its share.
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { checkGrpcResult, grpcClient } from "./grpc-client.js";
import { type Answer, check, checkAnswer, postJson, SEED, send, styleOf, useFuzzServer } from "./harness.js";

/** Distinctive names, so that finding one in an answer is never a coincidence; all seven long. */
const MODELS = ["orca-q7", "lynx-v3", "ibex-k9", "wren-m2"] as const;
/** A name no model has, as long as each of MODELS: the answer a forbidden model must get. */
const UNKNOWN = "yakz-u4";
type Model = (typeof MODELS)[number];

const CLIENTS = ["kiwi-team", "plum-team", "figs-team"] as const;
type Client = (typeof CLIENTS)[number];
const ADMIN = "ops-admin";
const SCRAPER = "scrape-bot";
const KEY_NAMES = [...CLIENTS, ADMIN, SCRAPER] as const;
type KeyName = (typeof KEY_NAMES)[number];

/** A PRNG seeded by the run's seed: the scopes are part of what FUZZ_SEED replays. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = mulberry32(SEED);

/**
 * Each client key's models: a random subset of one to three models (the first key) or of one to
 * four, or (one key in four but the first) no list at all, which means every model. The first key
 * is always scoped, so forbidden models exist in every run.
 */
const SCOPES = new Map<Client, readonly Model[] | undefined>();
for (const [i, key] of CLIENTS.entries()) {
  const shuffled = [...MODELS].sort(() => random() - 0.5);
  const size = 1 + Math.floor(random() * (i === 0 ? 3 : 4));
  SCOPES.set(key, i > 0 && random() < 0.25 ? undefined : shuffled.slice(0, size));
}
const SECRETS = Object.fromEntries(KEY_NAMES.map((n) => [n, `mp-${n}-${randomUUID()}`])) as Record<
  KeyName,
  string
>;
const bearer = (name: KeyName) => ({ authorization: `Bearer ${SECRETS[name]}` });
const mayUse = (key: Client, model: string) => (SCOPES.get(key) ?? MODELS).includes(model as Model);

const sha = (k: string) => `sha256:${createHash("sha256").update(k).digest("hex")}`;
const dir = mkdtempSync(join(tmpdir(), "modelport-fuzz-isolation-"));
const keyFile = join(dir, "keys.yaml");
writeFileSync(
  keyFile,
  [
    "keys:",
    ...CLIENTS.map((n) => {
      const models = SCOPES.get(n);
      return `  - {name: ${n}, hash: "${sha(SECRETS[n])}"${models ? `, models: [${models.join(", ")}]` : ""}}`;
    }),
    `  - {name: ${ADMIN}, hash: "${sha(SECRETS[ADMIN])}", role: admin}`,
    `  - {name: ${SCRAPER}, hash: "${sha(SECRETS[SCRAPER])}", role: metrics}`,
  ].join("\n"),
);
after(() => rmSync(dir, { recursive: true, force: true }));
process.stdout.write(
  `# isolation scopes: ${CLIENTS.map((k) => `${k}=${SCOPES.get(k)?.join("+") ?? "all"}`).join(" ")}\n`,
);

const ROW = [3, 95, 4, 1, 0, 20];
/** Regions a key may hold at once (server.sharedMemory.maxRegionsPerKey here). */
const PER_KEY_REGIONS = 3;

async function warm(url: string): Promise<void> {
  for (const m of MODELS) await postJson(url, `/v1/models/${m}/predict`, { rows: [ROW] }, bearer(ADMIN));
  await send(url, "GET", "/metrics", { headers: bearer(ADMIN) });
}

const server = useFuzzServer({
  warm,
  grpc: true,
  args: ["--keys", keyFile],
  server: [`capture: {dir: ${join(dir, "captured")}}`],
  sharedMemory: [`maxRegionsPerKey: ${PER_KEY_REGIONS}`],
  extra: (models) =>
    MODELS.flatMap((name) => [
      `  - name: ${name}`,
      `    path: ${join(models, "churn-tree.onnx")}`,
      "    threads: 1",
      "    capture: {sampleRate: 1}",
    ]),
});
const { unary } = grpcClient(() => server.grpc);

// ---------------------------------------------------------------------------------------------
// The requests

/** One request of some surface, naming model `m` where it names one. */
interface Surface {
  name: string;
  send(m: string, key: KeyName): Promise<Answer>;
  /** Whether the request names the model (and so can be compared with an unknown model's answer). */
  named: boolean;
  /** The HTTP path it is sent to, for the wire shape of its errors; none for gRPC. */
  path?: (m: string) => string;
  /** The OpenAI routes: a tensor model in scope is still no model of theirs (404). */
  languageOnly?: boolean;
  /** A management call (refused to every key here but the admin, which is not sent it). */
  management?: boolean;
}

const oipInput = (name: string, width = 6) => ({
  inputs: [{ name, datatype: "FP32", shape: [1, width], data: ROW.slice(0, width) }],
});
const http = (
  name: string,
  method: string,
  path: (m: string) => string,
  body?: (m: string) => unknown,
  headers: Record<string, string> = {},
): Surface => ({
  name,
  path,
  named: path("\u0000").includes("\u0000") || JSON.stringify(body?.("\u0000") ?? null).includes("\\u0000"),
  send: (m, key) =>
    body === undefined
      ? send(server.url, method, path(m), { headers: { ...headers, ...bearer(key) } })
      : postJson(server.url, path(m), body(m), { ...headers, ...bearer(key) }),
});

const openai: typeof http = (...args) => ({ ...http(...args), languageOnly: true });
/** A management call: only ever sent as a key that may not manage (an admin's would change the models). */
const management: typeof http = (...args) => ({ ...http(...args), management: true });

const SURFACES: Surface[] = [
  http(
    "predict",
    "POST",
    (m) => `/v1/models/${m}/predict`,
    () => ({ rows: [ROW] }),
  ),
  http(
    "predict, wrong width",
    "POST",
    (m) => `/v1/models/${m}/predict`,
    () => ({ rows: [[1, 2]] }),
  ),
  http(
    "predict, version 1",
    "POST",
    (m) => `/v1/models/${m}/versions/1/predict`,
    () => ({ rows: [ROW] }),
  ),
  http(
    "predict, version 9",
    "POST",
    (m) => `/v1/models/${m}/versions/9/predict`,
    () => ({ rows: [ROW] }),
  ),
  http(
    "predict @1",
    "POST",
    (m) => `/v1/models/${m}@1/predict`,
    () => ({ rows: [ROW] }),
  ),
  http(
    "predict, async",
    "POST",
    (m) => `/v1/models/${m}/predict`,
    () => ({ rows: [ROW] }),
    {
      prefer: "respond-async",
    },
  ),
  http(
    "job submit",
    "POST",
    (m) => `/v1/models/${m}/jobs`,
    () => ({ rows: [ROW] }),
  ),
  http("model", "GET", (m) => `/v1/models/${m}`),
  http(
    "OIP infer",
    "POST",
    (m) => `/v2/models/${m}/infer`,
    () => oipInput("features"),
  ),
  http(
    "OIP infer, wrong input",
    "POST",
    (m) => `/v2/models/${m}/infer`,
    () => oipInput("nope", 3),
  ),
  http("OIP metadata", "GET", (m) => `/v2/models/${m}`),
  http("OIP version 1", "GET", (m) => `/v2/models/${m}/versions/1`),
  http("OIP version 9", "GET", (m) => `/v2/models/${m}/versions/9/ready`),
  http("OIP ready", "GET", (m) => `/v2/models/${m}/ready`),
  openai(
    "chat",
    "POST",
    () => "/v1/chat/completions",
    (m) => ({ model: m, messages: [{ role: "user", content: "hi" }] }),
  ),
  openai(
    "chat, long prompt",
    "POST",
    () => "/v1/chat/completions",
    (m) => ({
      model: m,
      messages: [{ role: "user", content: "word ".repeat(20_000) }],
    }),
  ),
  openai(
    "completions",
    "POST",
    () => "/v1/completions",
    (m) => ({ model: m, prompt: "hi", max_tokens: 2 }),
  ),
  openai(
    "embeddings",
    "POST",
    () => "/v1/embeddings",
    (m) => ({ model: m, input: "hi" }),
  ),
  management(
    "unload",
    "POST",
    (m) => `/v1/models/${m}/unload`,
    () => ({}),
  ),
  management(
    "OIP unload",
    "POST",
    (m) => `/v2/repository/models/${m}/unload`,
    () => ({}),
  ),
  management(
    "promote",
    "POST",
    (m) => `/v1/models/${m}/promote`,
    () => ({ version: "1" }),
  ),
  http("models", "GET", () => "/v1/models"),
  http("OIP server", "GET", () => "/v2"),
  http("metrics", "GET", () => "/metrics"),
  http("readyz", "GET", () => "/readyz"),
  http("OIP ready (server)", "GET", () => "/v2/health/ready"),
  http("openapi", "GET", () => "/openapi.json"),
  http("docs", "GET", () => "/docs"),
  http("usage", "GET", () => "/v1/usage?group_by=key,model"),
  http("jobs", "GET", () => "/v1/jobs?limit=50"),
  ...(["ModelInfer", "ModelMetadata", "ModelReady"] as const).map(
    (method): Surface => ({
      name: `gRPC ${method}`,
      named: true,
      send: async (m, key) => {
        const message =
          method === "ModelInfer"
            ? {
                model_name: m,
                inputs: [
                  { name: "features", datatype: "FP32", shape: [1, 6], contents: { fp32_contents: ROW } },
                ],
              }
            : { name: m };
        const r = await unary(method, message, bearer(key));
        const code = checkGrpcResult(r, () => `${method} ${m} as ${key}`);
        // The answer as text: its status and details, or the message (without request ids).
        const text = r.err ? `${r.err.code} ${r.err.details}` : JSON.stringify(r.res);
        return { status: code ? 400 : 200, headers: {}, text, json: { code } };
      },
    }),
  ),
];

// ---------------------------------------------------------------------------------------------
// The oracle

/** Names `key` may not learn of: other keys, and models outside its scope. */
function secretsOf(key: KeyName): string[] {
  const others = KEY_NAMES.filter((k) => k !== key);
  // Admin and metrics keys see every key and model (their metrics and usage name them all).
  if (key === ADMIN || key === SCRAPER) return [];
  return [...others, ...MODELS.filter((m) => !mayUse(key as Client, m))];
}

/** An answer as text to search: status, headers (ids aside) and body. */
function wholeText(res: Answer): string {
  const headers = Object.entries(res.headers)
    .filter(([h]) => h !== "x-request-id" && h !== "date")
    .map(([h, v]) => `${h}: ${String(v)}`);
  return [String(res.status), ...headers, res.text].join("\n");
}

/** The answer with what differs between any two requests (ids, times, sizes) taken out. */
function comparable(res: Answer): string {
  const id = res.headers["x-request-id"];
  let text = wholeText(res)
    .replace(/\ncontent-length: \d+/, "")
    .replace(/\nx-modelport-instance: [^\n]*/, "")
    .replace(/\nratelimit[^\n]*/g, "");
  if (typeof id === "string") text = text.split(id).join("<id>");
  return text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/"(created|created_at|time|timestamp)":\d+/g, '"$1":0');
}

/** The MP_ERR code of an OIP-shaped answer, if any. */
const codeOf = (res: Answer) => (res.json as { code?: string } | undefined)?.code;

const seen = { forbidden: 0, allowed: 0, unknown: 0, listings: 0, jobs: 0, regions: 0, refusedRegions: 0 };
const createdJobs: { owner: Client; id: string }[] = [];

describe("tenant isolation", () => {
  it("a key learns of nothing outside its scope, on every surface", async () => {
    await check(
      "isolation",
      fc.asyncProperty(
        fc.constantFrom(...SURFACES),
        fc.constantFrom<KeyName>(...CLIENTS, ...CLIENTS, SCRAPER, ADMIN),
        fc.constantFrom<string>(...MODELS, UNKNOWN),
        async (surface, key, model) => {
          if (surface.management && key === ADMIN) return;
          const res = await surface.send(model, key);
          const what = `${surface.name} to ${model} as ${key} (scopes ${JSON.stringify(Object.fromEntries(SCOPES))})`;
          if (surface.path) checkAnswer(res, styleOf(surface.path(model)), { what });
          const named = surface.named ? model : undefined;
          const text = wholeText(res);
          for (const secret of secretsOf(key)) {
            if (secret === named) continue;
            assert.ok(
              !text.includes(secret),
              `${key} learned of '${secret}': ${what}\n${text.slice(0, 800)}`,
            );
          }
          if (res.status === 202) {
            const id = (res.json as { id?: string; job?: { id?: string } }).id;
            if (typeof id === "string" && CLIENTS.includes(key as Client))
              createdJobs.push({ owner: key as Client, id });
          }
          if (!surface.named) {
            seen.listings++;
            return;
          }
          const allowed = key === ADMIN || (CLIENTS.includes(key as Client) && mayUse(key as Client, model));
          if (model === UNKNOWN) {
            seen.unknown++;
            return;
          }
          if (allowed && !surface.languageOnly) {
            assert.ok(
              !/MP_ERR_MODEL_NOT_FOUND/.test(res.text),
              `a model in scope answered as unknown: ${what}\n${res.text.slice(0, 400)}`,
            );
            seen.allowed++;
            return;
          }
          if (allowed) return;
          // Out of scope: exactly what a model that does not exist gets.
          const twin = await surface.send(UNKNOWN, key);
          assert.equal(
            comparable(res).split(model).join(UNKNOWN),
            comparable(twin),
            `a model out of scope answered otherwise than an unknown one: ${what}`,
          );
          seen.forbidden++;
        },
      ),
    );
    assert.ok(seen.forbidden > 0 && seen.allowed > 0 && seen.listings > 0, JSON.stringify(seen));
  });

  it("another key's job is a job that does not exist, on every job route", async () => {
    // Jobs of every client key, on a model of its own.
    for (const owner of CLIENTS) {
      const m = (SCOPES.get(owner) ?? MODELS)[0]!;
      const res = await postJson(server.url, `/v1/models/${m}/jobs`, { rows: [ROW] }, bearer(owner));
      assert.equal(res.status, 202, res.text);
      createdJobs.push({ owner, id: (res.json as { id: string }).id });
    }
    const routes = [
      ["GET", (id: string) => `/v1/jobs/${id}`],
      ["GET", (id: string) => `/v1/jobs/${id}/result`],
      ["GET", (id: string) => `/v1/jobs/${id}/events`],
      ["DELETE", (id: string) => `/v1/jobs/${id}`],
      ["POST", (id: string) => `/v1/jobs/${id}/retry`],
    ] as const;
    await check(
      "isolationJobs",
      fc.asyncProperty(
        fc.constantFrom(...createdJobs),
        fc.constantFrom<Client>(...CLIENTS),
        fc.constantFrom(...routes),
        async (job, key, [method, path]) => {
          if (key === job.owner) return;
          const res = await send(server.url, method, path(job.id), { headers: bearer(key) });
          const twin = await send(server.url, method, path(randomUUID()), { headers: bearer(key) });
          assert.equal(
            res.status,
            404,
            `${key} ${method} ${path(job.id)} of ${job.owner}'s job: ${res.text}`,
          );
          assert.equal(comparable(res), comparable(twin), `${key} ${method} another key's job`);
          seen.jobs++;
        },
      ),
    );
    // The owners still see their jobs (the refusals above were about the key, not the id).
    for (const job of createdJobs.slice(-CLIENTS.length)) {
      const res = await send(server.url, "GET", `/v1/jobs/${job.id}`, { headers: bearer(job.owner) });
      assert.equal(res.status, 200, res.text);
    }
    assert.ok(seen.jobs > 0, JSON.stringify(seen));
  });

  it("shared memory: an object registered by one key is never another's; no key holds more than its share", async () => {
    // Objects under the fuzz servers' prefix, made by this (the server's) user.
    const objects = Array.from({ length: 6 }, (_, i) => `mp-fuzz-iso-${process.pid}-${i}`);
    for (const o of objects) writeFileSync(join("/dev/shm", o), Buffer.alloc(64));
    after(() => {
      for (const o of objects) rmSync(join("/dev/shm", o), { force: true });
    });
    /** Which key first registered each object: it stays that key's while the object exists. */
    const boundTo = new Map<string, Client>();
    const held = new Map<Client, Set<string>>(CLIENTS.map((c) => [c, new Set()]));
    await check(
      "isolationShm",
      fc.asyncProperty(
        fc.constantFrom<Client>(...CLIENTS),
        fc.constantFrom(...objects),
        fc.constantFrom("register", "unregister", "status"),
        fc.constantFrom("r0", "r1", "r2", "r3"),
        async (key, object, action, region) => {
          const headers = bearer(key);
          const base = `/v2/systemsharedmemory/region/${region}`;
          if (action === "status") {
            const res = await send(server.url, "GET", "/v2/systemsharedmemory/status", { headers });
            assert.equal(res.status, 200, res.text);
            const names = (res.json as { name: string }[]).map((r) => r.name).sort();
            assert.deepEqual(names, [...held.get(key)!].sort(), `${key} sees exactly its own regions`);
            return;
          }
          if (action === "unregister") {
            const res = await send(server.url, "POST", `${base}/unregister`, { headers });
            assert.equal(res.status, 200, res.text);
            held.get(key)!.delete(region);
            return;
          }
          const res = await postJson(
            server.url,
            `${base}/register`,
            { key: `/${object}`, byte_size: 64 },
            headers,
          );
          const what = `${key} registers /${object} as ${region} (bound to ${boundTo.get(object)}, holds ${[...held.get(key)!]})`;
          if (held.get(key)!.has(region)) {
            assert.equal(codeOf(res), "MP_ERR_SHARED_MEMORY_REGION_EXISTS", what);
            return;
          }
          if (held.get(key)!.size >= PER_KEY_REGIONS) {
            assert.equal(codeOf(res), "MP_ERR_SHARED_MEMORY_LIMIT", what);
            return;
          }
          const owner = boundTo.get(object);
          if (owner !== undefined && owner !== key) {
            assert.equal(res.status, 400, `${what}: ${res.text}`);
            assert.equal(codeOf(res), "MP_ERR_SHARED_MEMORY_KEY", what);
            assert.ok(!res.text.includes(owner), `the refusal names the other key: ${res.text}`);
            seen.refusedRegions++;
            return;
          }
          assert.equal(res.status, 200, `${what}: ${res.text}`);
          boundTo.set(object, key);
          held.get(key)!.add(region);
          seen.regions++;
        },
      ),
    );
    for (const key of CLIENTS)
      await send(server.url, "POST", "/v2/systemsharedmemory/unregister", { headers: bearer(key) });
    assert.ok(seen.regions > 0 && seen.refusedRegions > 0, JSON.stringify(seen));
  });

  it("afterwards: usage, per-key metrics and capture files hold only pairs in scope; every model is loaded", async () => {
    const usage = await send(server.url, "GET", "/v1/usage?group_by=key,model", { headers: bearer(ADMIN) });
    assert.equal(usage.status, 200, usage.text);
    const rows = (usage.json as { data: { key: string; model: string }[] }).data;
    assert.ok(rows.length > 0, "usage was recorded");
    for (const row of rows) {
      if (CLIENTS.includes(row.key as Client))
        assert.ok(mayUse(row.key as Client, row.model), `usage of ${row.key} on ${row.model}`);
    }
    const metrics = await send(server.url, "GET", "/metrics", { headers: bearer(SCRAPER) });
    assert.equal(metrics.status, 200, metrics.text.slice(0, 300));
    let series = 0;
    for (const m of metrics.text.matchAll(/^modelport_key_\w+\{([^}]*)\}/gm)) {
      const key = /key="([^"]*)"/.exec(m[1]!)?.[1];
      const model = /model="([^"]*)"/.exec(m[1]!)?.[1];
      if (key && model && CLIENTS.includes(key as Client)) {
        assert.ok(mayUse(key as Client, model), `metric series of ${key} on ${model}: ${m[0]}`);
        series++;
      }
    }
    assert.ok(series > 0, "per-key series were found");
    // Capture: drained within the drain time; every record's key may use its model.
    let records = 0;
    const captured = join(dir, "captured");
    for (let i = 0; i < 50 && records === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      records = readdirSync(captured).length;
    }
    records = 0;
    for (const file of readdirSync(captured)) {
      for (const line of readFileSync(join(captured, file), "utf8").split("\n")) {
        if (line === "") continue;
        const record = JSON.parse(line) as { key: string | null; model: string };
        if (CLIENTS.includes(record.key as Client))
          assert.ok(mayUse(record.key as Client, record.model), `captured ${record.key} on ${record.model}`);
        records++;
      }
    }
    assert.ok(records > 0, "records were captured");
    const ready = await send(server.url, "GET", "/readyz", { headers: bearer(ADMIN) });
    assert.equal(ready.status, 200, `every model still loaded: ${ready.text}`);
  });

  server.finalCheck();
});
