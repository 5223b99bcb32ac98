// API keys on every route: the routes are read from the built app itself (Fastify's route
// tree), so a route added later is covered without editing this test. Without a key every one
// answers 401 MP_ERR_AUTH_REQUIRED except the four probes and the dashboard's static files (/ui,
// which hold no data; the page asks for the key), the WebSocket upgrade included; with a key none
// does. Split tiers: a runner started with keys refuses callers without one, and the
// API tier, holding the same key, authenticates to it, so predicts through the API tier succeed.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import WebSocket from "ws";
import { loadConfig } from "../../src/config/load.js";
import { buildApp } from "../../src/server/app.js";
import { testModels } from "../helpers/models.js";
import { type ChildServer, postJson, startChild, waitReady } from "../helpers/server.js";

const KEY = "every-route-key-0123";
const PROBES = new Set(["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]);
/** The dashboard's page and bundle (src/server/routes/ui.ts): public, every call they make is not. */
const PUBLIC = new Set(["/ui", "/ui/", "/ui/app.js", "/ui/app.css"]);
/** The server under test: a real `modelport serve` process with the same config as `routeTree`'s app. */
let srv: ChildServer;
/** Fastify's route tree of an app built from that config. */
let routeTree: string;
let jobId: string;

/** Every [method, path] in Fastify's printRoutes tree (commonPrefix: false). */
function parseRouteTree(tree: string): [string, string][] {
  const routes: [string, string][] = [];
  const stack: string[] = [];
  for (const line of tree.split("\n")) {
    const m = /^([│ ]*)[├└]── (\S+) \(([^)]+)\)$/.exec(line.replace(/\s+$/, ""));
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    const path = stack.join("");
    for (const method of m[3]!.split(", ")) routes.push([method, path]);
  }
  return routes;
}

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-auth-routes-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      `  apiKeys: [${KEY}]`,
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
    ].join("\n"),
  );
  const built = buildApp(loadConfig({ file, env: {} }), { logger: pino({ level: "silent" }) });
  await built.app.ready();
  routeTree = built.app.printRoutes({ commonPrefix: false });
  await built.close();
  srv = await startChild(["-c", file], { MODELPORT_API_KEYS: "" });
  assert.equal((await waitReady(srv.url, 60_000)).status, 200, srv.output().slice(-2000));
  const job = await postJson(
    `${srv.url}/v1/models/churn-tree/jobs`,
    { rows: [[3, 95, 4, 1, 0, 20]] },
    { authorization: `Bearer ${KEY}` },
  );
  assert.equal(job.status, 202, JSON.stringify(job.body));
  jobId = job.body.id;
});
after(async () => {
  await srv?.stop("SIGKILL");
});

const concrete = (path: string) =>
  path.replace(":model", "churn-tree").replace(":version", "1").replace(":id", jobId);

describe("API keys on every registered route", () => {
  it("the route tree is read whole: it holds the routes this test must cover", () => {
    const routes = parseRouteTree(routeTree);
    const keys = new Set(routes.map(([m, p]) => `${m} ${p}`));
    for (const must of [
      "GET /v1/jobs/ws",
      "GET /v1/jobs/:id/events",
      "POST /v1/chat/completions",
      "POST /v1/completions",
      "POST /v1/embeddings",
      "POST /v2/models/:model/infer",
      "POST /v2/models/:model/versions/:version/infer",
      "POST /v1/models/:model/predict",
      "DELETE /v1/jobs/:id",
      "GET /livez",
      "GET /ui",
    ])
      assert.ok(keys.has(must), `${must} missing from ${[...keys].join(", ")}`);
    assert.ok(routes.length >= 30, `${routes.length} routes`);
  });

  it("without a key: 401 MP_ERR_AUTH_REQUIRED on every route but the probes; with the key: never 401", async () => {
    const routes = parseRouteTree(routeTree);
    const checked: string[] = [];
    for (const [method, path] of routes) {
      const url = `${srv.url}${concrete(path)}`;
      const init = (headers: Record<string, string>): RequestInit => ({
        method,
        headers: method === "POST" ? { "content-type": "application/json", ...headers } : headers,
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      const none = await fetch(url, { ...init({}), redirect: "manual" });
      if (PUBLIC.has(path)) {
        await none.arrayBuffer();
        assert.ok(none.status === 200 || none.status === 301, `${method} ${path}: ${none.status}`);
        continue;
      }
      const body = method === "HEAD" ? undefined : ((await none.json()) as any);
      if (PROBES.has(path)) {
        assert.notEqual(none.status, 401, `${method} ${path}`);
        continue;
      }
      assert.equal(none.status, 401, `${method} ${path} without a key`);
      // Each surface in its own error shape: native {error: {code}}, OpenAI {error: {code}}, Open
      // Inference Protocol {error: "message", code}.
      if (body) assert.equal(body.code ?? body.error.code, "MP_ERR_AUTH_REQUIRED", `${method} ${path}`);
      const wrong = await fetch(url, init({ authorization: "Bearer not-the-key-at-all" }));
      await wrong.arrayBuffer();
      assert.equal(wrong.status, 401, `${method} ${path} with a wrong key`);
      // With the key, whatever the route answers (200, 400 for an empty body, 404 ...), it is
      // not the auth check. The WebSocket route without an upgrade and SSE are checked below.
      if (path === "/v1/jobs/ws" || path.endsWith("/events")) continue;
      const ok = await fetch(url, init({ authorization: `Bearer ${KEY}` }));
      await ok.arrayBuffer();
      assert.notEqual(ok.status, 401, `${method} ${path} with the key`);
      checked.push(`${method} ${path}`);
    }
    assert.ok(checked.length >= 25, checked.join(", "));
  });

  it("SSE job events: 401 without a key, a stream with it", async () => {
    const none = await fetch(`${srv.url}/v1/jobs/${jobId}/events`);
    assert.equal(none.status, 401);
    const ok = await fetch(`${srv.url}/v1/jobs/${jobId}/events`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(ok.status, 200);
    assert.match(ok.headers.get("content-type") ?? "", /text\/event-stream/);
    assert.match(await ok.text(), /event: end/);
  });

  it("WebSocket upgrade: refused with 401 without a key, opens with it", async () => {
    const ws = `${srv.url.replace("http", "ws")}/v1/jobs/ws`;
    const refused = await new Promise<number>((resolve, reject) => {
      const sock = new WebSocket(ws);
      sock.on("unexpected-response", (_req, res) => {
        resolve(res.statusCode ?? 0);
        sock.terminate();
      });
      sock.on("open", () => reject(new Error("opened without a key")));
      sock.on("error", () => {});
    });
    assert.equal(refused, 401);
    const msg = await new Promise<any>((resolve, reject) => {
      const sock = new WebSocket(ws, { headers: { authorization: `Bearer ${KEY}` } });
      sock.on("open", () => sock.send(JSON.stringify({ subscribe: [jobId] })));
      sock.on("message", (d) => {
        resolve(JSON.parse(String(d)));
        sock.close();
      });
      sock.on("unexpected-response", (_q, res) => reject(new Error(`status ${res.statusCode}`)));
    });
    assert.equal(msg.type, "job");
    assert.equal(msg.job.id, jobId);
  });
});

describe("split tiers with API keys", () => {
  const children: ChildServer[] = [];
  after(async () => {
    for (const c of children) await c.stop("SIGKILL");
  });

  it("the runner refuses callers without the key; the API tier authenticates to it and predicts succeed", async () => {
    const model = join(await testModels(), "churn-tree.onnx");
    const runner = await startChild([model, "--role", "runner", "--api-key", KEY]);
    children.push(runner);
    assert.equal((await waitReady(runner.url, 60_000)).status, 200, runner.output().slice(-2000));
    const api = await startChild([model, "--role", "api", "--runner", runner.url, "--api-key", KEY]);
    children.push(api);
    assert.equal((await waitReady(api.url, 60_000)).status, 200, api.output().slice(-2000));

    const body = { rows: [[3, 95, 4, 1, 0, 20]] };
    const auth = { authorization: `Bearer ${KEY}` };
    const direct = await postJson(`${runner.url}/v1/models/churn-tree/predict`, body);
    assert.equal(direct.status, 401);
    assert.equal(direct.body.error.code, "MP_ERR_AUTH_REQUIRED");
    const infer = await postJson(`${runner.url}/v2/models/churn-tree/infer`, { inputs: [] });
    assert.equal(infer.status, 401, "the route the API tier forwards to is guarded too");

    assert.equal((await postJson(`${api.url}/v1/models/churn-tree/predict`, body)).status, 401);
    const viaApi = await postJson(`${api.url}/v1/models/churn-tree/predict`, body, auth);
    assert.equal(viaApi.status, 200, JSON.stringify(viaApi.body));
    const fromRunner = await postJson(`${runner.url}/v1/models/churn-tree/predict`, body, auth);
    assert.equal(fromRunner.status, 200);
    assert.deepEqual(viaApi.body.outputs, fromRunner.body.outputs);

    // A runner with another key: the API tier's polls are refused, so it is never in the rotation.
    const other = await startChild([model, "--role", "runner", "--api-key", "a-different-key-987"]);
    children.push(other);
    assert.equal((await waitReady(other.url, 60_000)).status, 200);
    const api2 = await startChild([model, "--role", "api", "--runner", other.url, "--api-key", KEY]);
    children.push(api2);
    const notReady = await waitReady(api2.url, 5000);
    assert.equal(notReady.status, 503, JSON.stringify(notReady.body));
    const refused = await postJson(`${api2.url}/v1/models/churn-tree/predict`, body, auth);
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
  });
});
