// Fuzzes a `modelport serve` process with a key file (docs/Multi-tenant.md): Authorization
// headers of every kind on every kind of route and as gRPC metadata, /v1/usage with any query,
// and bursts from a key with limits beside a key without. A header that does not carry a key never gets in; an exact
// `Bearer <key>` is that key, with its role and models; a limited key gets 200 or 429 and never
// slows another key into a 429.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import fc from "fast-check";
import { edgeString, headerSafe } from "./arbitraries.js";
import { checkGrpcResult, grpcClient } from "./grpc-client.js";
import { type Answer, check, checkAnswer, postJson, send, styleOf, useFuzzServer } from "./harness.js";

const KEYS = {
  open: "mp-open-5c1f0e2d9b7a4c38a1e6",
  limited: "mp-limited-8d3b71f04e2a9c65d0b1",
  ops: "mp-ops-2a7e9c4f1b8d3e6a5c0f",
} as const;
type KeyName = keyof typeof KEYS;
const sha = (k: string) => `sha256:${createHash("sha256").update(k).digest("hex")}`;

const dir = mkdtempSync(join(tmpdir(), "modelport-fuzz-keys-"));
const keyFile = join(dir, "keys.yaml");
writeFileSync(
  keyFile,
  [
    "keys:",
    `  - {name: open, hash: "${sha(KEYS.open)}"}`,
    `  - name: limited`,
    `    hash: "${sha(KEYS.limited)}"`,
    "    models: [tree]",
    "    limits: {requestsPerSecond: 200, burst: 20, concurrent: 3, queuedJobs: 3}",
    `  - {name: ops, hash: "${sha(KEYS.ops)}", role: admin}`,
  ].join("\n"),
);
after(() => rmSync(dir, { recursive: true, force: true }));

const bearer = (name: KeyName) => ({ authorization: `Bearer ${KEYS[name]}` });
const ROW = [3, 95, 4, 1, 0, 20];

async function warm(url: string): Promise<void> {
  for (const name of ["open", "ops"] as const) {
    await postJson(url, "/v1/models/tree/predict", { rows: [ROW] }, bearer(name));
    await send(url, "GET", "/v1/usage", { headers: bearer(name) });
  }
}

const server = useFuzzServer({ warm, grpc: true, args: ["--keys", keyFile] });
const { unary } = grpcClient(() => server.grpc);

/** gRPC calls of each kind a key's role and models decide (the same keys, models and limits hold there). */
const GRPC_CALLS: { method: string; message: object; needs?: "mlp" }[] = [
  {
    method: "ModelInfer",
    message: {
      model_name: "tree",
      inputs: [{ name: "features", datatype: "FP32", shape: [1, 6], contents: { fp32_contents: ROW } }],
    },
  },
  { method: "ModelMetadata", message: { name: "mlp" }, needs: "mlp" },
  { method: "ModelReady", message: { name: "tree" } },
];

/** A request of each kind a key's role and models decide. */
interface Call {
  method: string;
  path: string;
  body?: unknown;
  /** What it needs besides a key: a model the limited key lacks, or the admin role. */
  needs?: "mlp" | "admin";
}
const CALLS: Call[] = [
  { method: "POST", path: "/v1/models/tree/predict", body: { rows: [ROW] } },
  { method: "POST", path: "/v1/models/mlp/predict", body: { rows: [[1, 2, 3, 4]] }, needs: "mlp" },
  {
    method: "POST",
    path: "/v2/models/tree/infer",
    body: { inputs: [{ name: "features", datatype: "FP32", shape: [1, 6], data: ROW }] },
  },
  { method: "GET", path: "/v2/models/mlp", needs: "mlp" },
  { method: "GET", path: "/v1/models" },
  { method: "GET", path: "/v1/models/tree" },
  { method: "GET", path: "/v1/jobs?limit=2" },
  { method: "GET", path: "/v1/usage" },
  { method: "POST", path: "/v2/repository/index", body: {}, needs: "admin" },
  { method: "POST", path: "/v1/models/tree/weights", body: { weights: null }, needs: "admin" },
];

/** Headers: exact keys, keys bent (case, spaces, cut, joined), other schemes, and noise. */
const keyName = fc.constantFrom<KeyName>("open", "limited", "ops");
/** Ways to bend a key `k` (`i` picks where, for those that need it). */
const BENDS: Record<string, (k: string, i: number) => string> = {
  same: (k) => k,
  cut: (k, i) => k.slice(0, i % k.length),
  upper: (k) => k.toUpperCase(),
  extra: (k, i) => `${k}${"x="[i % 2]}`,
  prefix: (k) => `x${k}`,
  twice: (k) => `${k},${k}`,
  swap: (k) => `${k.slice(1)}${k[0]}`,
};

const authorization: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: keyName.map((n) => `Bearer ${KEYS[n]}`), weight: 4 },
  {
    arbitrary: fc
      .tuple(
        keyName,
        fc.constantFrom(
          "bearer",
          "BEARER",
          "Bearer ",
          "Bearer\t",
          "Basic",
          "Token",
          "",
          "Bearer:",
          "Bearer=",
          "Bearer Bearer",
        ),
        fc.constantFrom(...Object.values(BENDS)),
        fc.nat(),
      )
      .map(([n, scheme, bend, i]) => `${scheme} ${bend(KEYS[n], i)}`),
    weight: 6,
  },
  { arbitrary: edgeString.map(headerSafe), weight: 2 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

/** The key an answer may have been let in as: the header has to carry it whole. */
const carried = (header: string | undefined) =>
  (Object.keys(KEYS) as KeyName[]).filter((n) => header?.includes(KEYS[n]));

function send1(call: Call, headers: Record<string, string>): Promise<Answer> {
  return call.body === undefined
    ? send(server.url, call.method, call.path, { headers })
    : postJson(server.url, call.path, call.body, headers);
}

/** Outcomes seen, so that a run proves it reached each branch of its oracle. */
const seen = { refused: 0, exact: 0, limited429: 0, grpcRefused: 0, grpcExact: 0 };

describe("keys, scopes and limits", () => {
  it("a header without a key never gets in; an exact key is that key, with its role and models", async () => {
    await check(
      "authHeaders",
      fc.asyncProperty(fc.constantFrom(...CALLS), authorization, async (call, header) => {
        const res = await send1(call, header === undefined ? {} : { authorization: header });
        const what = `${call.method} ${call.path} with ${JSON.stringify(header)}`;
        const code = checkAnswer(res, styleOf(call.path), { what });
        const keys = carried(header);
        if (keys.length === 0) {
          assert.ok(
            code === "MP_ERR_AUTH_REQUIRED" || code === "MP_ERR_AUTH_INVALID",
            `no key, yet not refused: ${res.status} ${code}${what}`,
          );
          seen.refused++;
          return;
        }
        const exact = keys.find((n) => header === `Bearer ${KEYS[n]}`);
        if (exact === undefined) return; // a bent header that still carries a key: coded either way
        if (res.status === 429) {
          assert.equal(exact, "limited", `only the limited key is rate limited${what}`);
          return;
        }
        const expected =
          call.needs === "admin" && exact !== "ops"
            ? "MP_ERR_ADMIN_REQUIRED"
            : call.needs === "mlp" && exact === "limited"
              ? "MP_ERR_MODEL_NOT_FOUND"
              : undefined;
        assert.equal(code, expected, `${exact}: ${res.status} ${res.text.slice(0, 200)}${what}`);
        seen.exact++;
        if (call.path === "/v1/models" && exact === "limited") {
          const body = res.json as { data?: { id?: string }[]; models?: { name?: string }[] };
          assert.deepEqual(
            [body.data?.map((m) => m.id), body.models?.map((m) => m.name)],
            [["tree"], ["tree"]],
            `the limited key lists only its model${what}`,
          );
        }
      }),
    );
    assert.ok(seen.refused > 0 && seen.exact > 0, `both branches reached: ${JSON.stringify(seen)}`);
  });

  it("over gRPC too: metadata without a key never gets in; an exact key is that key", async () => {
    await check(
      "grpcAuth",
      fc.asyncProperty(fc.constantFrom(...GRPC_CALLS), authorization, async (call, text) => {
        // grpc-js sends printable ASCII only in a text metadata value.
        const header = text?.replace(/[^\x20-\x7e]/g, "");
        const r = await unary(
          call.method,
          call.message,
          header === undefined ? {} : { authorization: header },
        );
        const what = () => `${call.method} with ${JSON.stringify(header)}`;
        const code = checkGrpcResult(r, what);
        const keys = carried(header);
        if (keys.length === 0) {
          assert.ok(
            code === "MP_ERR_AUTH_REQUIRED" || code === "MP_ERR_AUTH_INVALID",
            `no key, yet not refused: ${code}: ${what()}`,
          );
          seen.grpcRefused++;
          return;
        }
        const exact = keys.find((n) => header === `Bearer ${KEYS[n]}`);
        if (exact === undefined) return;
        if (code === "MP_ERR_RATE_LIMITED") {
          assert.equal(exact, "limited", `only the limited key is rate limited: ${what()}`);
          return;
        }
        const expected = call.needs === "mlp" && exact === "limited" ? "MP_ERR_MODEL_NOT_FOUND" : undefined;
        assert.equal(code, expected, `${exact}: ${r.err?.details}: ${what()}`);
        seen.grpcExact++;
      }),
    );
    assert.ok(seen.grpcRefused > 0 && seen.grpcExact > 0, `both branches reached: ${JSON.stringify(seen)}`);
  });

  it("/v1/usage with any query: 200 with the caller's own rows, or a coded 400", () =>
    check(
      "usageQuery",
      fc.asyncProperty(
        fc.constantFrom<KeyName>("open", "ops"),
        // Pairs, so that a parameter may come twice.
        fc.array(
          fc.tuple(
            fc.constantFrom("from", "to", "group_by", "key", "model", "x"),
            fc.oneof(
              fc.constantFrom(
                "key",
                "model",
                "hour",
                "day",
                "key,model,hour,day",
                "key,key",
                "",
                ",",
                "2026-11-01",
                "2026-13-45",
                "0",
                "-1",
                "1e20",
                "9999999999999999",
                "8640000000000000",
                "+275760-09-13T00:00:00Z",
                "NaN",
                "2026-12-01T00:00:00Z",
                "tomorrow",
              ),
              fc.integer().map(String),
              edgeString.map(headerSafe),
            ),
          ),
          { maxLength: 4 },
        ),
        async (name, query) => {
          const qs = query.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
          const path = `/v1/usage?${qs}`;
          const res = await send(server.url, "GET", path, { headers: bearer(name) });
          checkAnswer(res, "native", { what: `${name} ${path}` });
          if (res.status !== 200) return;
          const body = res.json as { data: { key?: string }[] };
          assert.ok(Array.isArray(body.data), `usage data is a list: ${res.text.slice(0, 200)}`);
          if (name === "open")
            for (const row of body.data)
              assert.ok(
                row.key === undefined || row.key === "open",
                `a client sees only its own usage: ${row.key}`,
              );
        },
      ),
    ));

  it("bursts from the limited key get 200 or 429 with Retry-After and the limit; the open key alongside never a 429", async () => {
    await check(
      "keyLimits",
      fc.asyncProperty(
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 10 }),
        fc.boolean(),
        async (limited, open, jobs) => {
          const path = jobs ? "/v1/models/tree/jobs" : "/v1/models/tree/predict";
          const calls = [
            ...Array.from({ length: limited }, () => ["limited", path] as const),
            ...Array.from({ length: open }, () => ["open", "/v1/models/tree/predict"] as const),
          ];
          const answers = await Promise.all(
            calls.map(([name, p]) => postJson(server.url, p, { rows: [ROW] }, bearer(name))),
          );
          answers.forEach((res, i) => {
            const [name, p] = calls[i]!;
            const what = ` (${name} ${p}, ${limited} limited and ${open} open at once)`;
            const code = checkAnswer(res, "native", { what });
            if (res.status < 400) return;
            assert.equal(name, "limited", `a key without limits refused: ${res.status} ${code}${what}`);
            assert.equal(code, "MP_ERR_RATE_LIMITED", `${res.status} ${res.text.slice(0, 200)}${what}`);
            assert.ok(Number(res.headers["retry-after"]) >= 1, `Retry-After on a 429${what}`);
            const limit = (res.json as { error: { details?: { limit?: string } } }).error.details?.limit;
            assert.ok(typeof limit === "string" && limit.length > 0, `details.limit names the limit${what}`);
            seen.limited429++;
          });
          // Jobs count against queuedJobs until they end: wait for this case's to finish.
          if (jobs) await new Promise((r) => setTimeout(r, 50));
        },
      ),
    );
    // Bursts of up to 30 against 3 concurrent requests: some must have been refused.
    assert.ok(seen.limited429 > 0, "no burst reached the limited key's limits");
  });

  server.finalCheck();
});
