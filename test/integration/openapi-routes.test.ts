// /openapi.json describes every route the server registers: the router's routes, collected with
// Fastify's onRoute hook on a server with every surface on (a tensor model, a language model,
// jobs, shared memory), are compared with the document's paths both ways. A new route fails this
// test until it has its line in src/server/openapi-routes.ts.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pino } from "pino";
import { loadConfig } from "../../src/config/load.js";
import { buildApp, type ModelportApp } from "../../src/server/app.js";
import { testModels } from "../helpers/models.js";

/** Routes the document leaves out on purpose, each with the reason. */
const NOT_DOCUMENTED: Record<string, string> = {
  "GET /ui/": "the dashboard's page under its directory URL; /ui is documented",
  "GET /ui/app.js": "the dashboard's script, a static file",
  "GET /ui/app.css": "the dashboard's style sheet, a static file",
};

let server: ModelportApp;
const routes = new Set<string>();

before(async () => {
  const models = await testModels();
  const dir = mkdtempSync(join(tmpdir(), "modelport-openapi-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server: {sharedMemory: {enabled: true}}",
      "jobs:",
      `  sqlitePath: ${join(dir, "jobs.db")}`,
      `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
      "models:",
      `  - {name: churn-tree, path: ${join(models, "churn-tree.onnx")}}`,
      `  - {name: tiny-llama, path: ${join(models, "tiny-llama.gguf")}}`,
    ].join("\n"),
  );
  server = buildApp(loadConfig({ file, flags: { port: 0 } }), { logger: pino({ level: "silent" }) });
  // Every route is registered by a plugin, so a hook added before ready() sees them all.
  server.app.addHook("onRoute", (route) => {
    // Fastify answers HEAD for every GET route by itself (exposeHeadRoutes): not a route of ours.
    for (const method of [route.method].flat()) if (method !== "HEAD") routes.add(`${method} ${route.url}`);
  });
  await server.app.ready();
});

after(async () => {
  await server?.close();
});

/** `/v1/models/:model/predict` → `/v1/models/{model}/predict`. */
const openApiPath = (url: string) => url.replace(/:(\w+)/g, "{$1}");

describe("/openapi.json and the router", () => {
  it("documents every route the server registers, with its method", async () => {
    const doc = (await server.app.inject({ url: "/openapi.json" })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    assert.ok(routes.size > 40, `only ${routes.size} routes seen`);
    assert.ok(routes.has("POST /v1/jobs/:id/retry"), "the jobs routes are registered");
    const missing: string[] = [];
    for (const route of routes) {
      if (route in NOT_DOCUMENTED) continue;
      const [method, url] = route.split(" ") as [string, string];
      if (!doc.paths[openApiPath(url)]?.[method.toLowerCase()]) missing.push(route);
    }
    assert.deepEqual(missing, [], "routes without an operation in /openapi.json");
  });

  it("documents no operation the router lacks (a model's own paths match its route's pattern)", async () => {
    const doc = (await server.app.inject({ url: "/openapi.json" })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const patterns = [...routes].map((route) => {
      const [method, url] = route.split(" ") as [string, string];
      const re = new RegExp(
        `^${openApiPath(url)
          .replace(/\{\w+\}/g, "[^/]+")
          .replace(/\./g, "\\.")}$`,
      );
      return { method: method.toLowerCase(), re };
    });
    const unknown: string[] = [];
    for (const [path, item] of Object.entries(doc.paths))
      for (const method of Object.keys(item))
        if (!patterns.some((p) => p.method === method && p.re.test(path))) unknown.push(`${method} ${path}`);
    assert.deepEqual(unknown, [], "operations in /openapi.json that no route serves");
    assert.ok(doc.paths["/v1/models/churn-tree/predict"]?.post, "a model's own predict operation");
  });

  it("names every left-out route that the router still has", () => {
    for (const route of Object.keys(NOT_DOCUMENTED))
      assert.ok(routes.has(route), `${route} is no longer registered`);
  });
});
