// The audit log names who acted (docs/Multi-tenant.md "Audit log"): management calls of a
// valid key are audit lines (a client key's 403 MP_ERR_ADMIN_REQUIRED too), and so are those of
// a loopback caller of a server without keys; calls with no key or a wrong one are not (each line
// is a synchronous write, and anyone could make them), they are counted in
// modelport_management_refused_total{action,code}. Real servers with an audit file each: a key
// file, no keys at all, and admin keys only (where a wrong key is let in as nobody).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parsePrometheus } from "../../src/cli/cost.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, startInProcess } from "../helpers/server.js";

const OPS = `mp_${"o".repeat(43)}`;
const CLIENT = `mp_${"c".repeat(43)}`;
const WRONG = `mp_${"w".repeat(43)}`;
const hash = (key: string) => `sha256:${createHash("sha256").update(key).digest("hex")}`;

/** Every management route, by action, with a body it takes. */
const ROUTES: [string, string, unknown][] = [
  ["unload", "/v2/repository/models/churn/unload", {}],
  ["load", "/v2/repository/models/churn/load", {}],
  ["index", "/v2/repository/index", {}],
  ["promote", "/v1/models/churn/promote", { version: "1" }],
  ["rollback", "/v1/models/churn/rollback", {}],
  ["weights", "/v1/models/churn/weights", { weights: { "1": 1 } }],
  ["shadow", "/v1/models/churn/shadow", { version: "1" }],
];

let models: string;
const servers: InProcessServer[] = [];

/** A server with churn-tree, an audit file and `server` settings; resolves to it and its audit file. */
async function serve(serverLines: string[]): Promise<{ server: InProcessServer; audit: string }> {
  const dir = mkdtempSync(join(tmpdir(), "modelport-management-audit-"));
  const audit = join(dir, "audit.jsonl");
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  auditLog: ${audit}`,
      ...serverLines.map((l) => `  ${l}`),
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      "models:",
      `  - {name: churn, path: ${join(models, "churn-tree.onnx")}}`,
      "",
    ].join("\n"),
  );
  const server = await startInProcess({ file, env: {} });
  servers.push(server);
  return { server, audit };
}

async function manage(server: InProcessServer, path: string, body: unknown, key?: string) {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

function auditLines(file: string): [string, string, string | undefined, string][] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {}
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .map((l) => [l.key, l.action, l.target, l.result]);
}

/** modelport_management_refused_total by "action code". */
async function refusedCounts(server: InProcessServer, key?: string): Promise<Record<string, number>> {
  const text = await (
    await fetch(`${server.url}/metrics`, { headers: key ? { authorization: `Bearer ${key}` } : {} })
  ).text();
  return Object.fromEntries(
    parsePrometheus(text)
      .filter((s) => s.name === "modelport_management_refused_total")
      .map((s) => [`${s.labels.action} ${s.labels.code}`, s.value]),
  );
}

before(async () => {
  models = await testModels();
});

after(async () => {
  for (const s of servers) await s.close();
});

describe("the audit log names who acted", () => {
  it("a server with keys: 200 calls with no key or a wrong one write no line and are counted; a client's 403 and an admin's action are one line each", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-management-keys-"));
    writeFileSync(
      join(dir, "keys.yaml"),
      [
        "keys:",
        `  - {name: ops, role: admin, hash: ${hash(OPS)}}`,
        `  - {name: client, hash: ${hash(CLIENT)}}`,
        "",
      ].join("\n"),
    );
    const { server, audit } = await serve([`keys: ${join(dir, "keys.yaml")}`]);
    const expected: Record<string, number> = {};
    for (let i = 0; i < 200; i++) {
      const [action, path, body] = ROUTES[i % ROUTES.length]!;
      const key = i % 2 === 0 ? undefined : WRONG;
      const res = await manage(server, path, body, key);
      const code = key ? "MP_ERR_AUTH_INVALID" : "MP_ERR_AUTH_REQUIRED";
      assert.equal(res.status, 401, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.code ?? res.body.error?.code, code, path);
      expected[`${action} ${code}`] = (expected[`${action} ${code}`] ?? 0) + 1;
    }
    assert.deepEqual(auditLines(audit), [], "no line for callers without a valid key");
    const counted = await refusedCounts(server, OPS);
    assert.deepEqual(counted, expected);
    assert.equal(
      Object.values(counted).reduce((a, b) => a + b, 0),
      200,
    );

    // A valid client key is someone: its refusal is audited. So is the admin's action.
    assert.equal((await manage(server, ROUTES[0]![1], {}, CLIENT)).status, 403);
    assert.equal((await manage(server, ROUTES[0]![1], {}, OPS)).status, 200);
    assert.equal((await manage(server, ROUTES[1]![1], {}, OPS)).status, 200);
    assert.deepEqual(auditLines(audit), [
      ["client", "unload", "churn", "MP_ERR_ADMIN_REQUIRED"],
      ["ops", "unload", "churn", "ok"],
      ["ops", "load", "churn", "ok"],
    ]);
    assert.deepEqual(await refusedCounts(server, OPS), expected, "the known callers are not counted");
  });

  it("a server without keys: its loopback caller is let in and audited as anonymous", async () => {
    const { server, audit } = await serve([]);
    assert.equal((await manage(server, ROUTES[0]![1], {})).status, 200);
    assert.equal((await manage(server, ROUTES[1]![1], {})).status, 200);
    assert.deepEqual(auditLines(audit), [
      ["anonymous", "unload", "churn", "ok"],
      ["anonymous", "load", "churn", "ok"],
    ]);
    assert.deepEqual(await refusedCounts(server), {});
  });

  it("admin keys only: no key (401) and a wrong key (let in as nobody: 403) are counted, the admin audited", async () => {
    const { server, audit } = await serve([`adminKeys: [${OPS}]`]);
    const none = await manage(server, ROUTES[0]![1], {});
    assert.deepEqual([none.status, none.body.code], [401, "MP_ERR_AUTH_REQUIRED"]);
    const wrong = await manage(server, ROUTES[0]![1], {}, WRONG);
    assert.deepEqual([wrong.status, wrong.body.code], [403, "MP_ERR_ADMIN_REQUIRED"]);
    assert.deepEqual(auditLines(audit), []);
    assert.equal((await manage(server, ROUTES[0]![1], {}, OPS)).status, 200);
    assert.deepEqual(auditLines(audit), [["admin-key-1", "unload", "churn", "ok"]]);
    assert.deepEqual(await refusedCounts(server, OPS), {
      "unload MP_ERR_AUTH_REQUIRED": 1,
      "unload MP_ERR_ADMIN_REQUIRED": 1,
    });
  });
});
