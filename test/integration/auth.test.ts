// Optional API keys: with keys configured every route but the probes needs a valid bearer
// token; without keys nothing does.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let open: InProcessServer;
let locked: InProcessServer;
const KEY = "s3cret-key-for-tests";

before(async () => {
  const modelPath = join(await testModels(), "churn-tree.onnx");
  open = await startInProcess({ modelPath, env: {} });
  locked = await startInProcess({ modelPath, flags: { apiKeys: [KEY, "other-key-123"] }, env: {} });
});
after(async () => {
  await open.close();
  await locked.close();
});

const body = { rows: [[1, 2, 3, 1, 0, 4]] };

describe("auth", () => {
  it("off: predict needs no key", async () => {
    assert.equal((await postJson(`${open.url}/v1/models/churn-tree/predict`, body)).status, 200);
  });

  it("on: no key is 401 MP_ERR_AUTH_REQUIRED, a wrong key 401 MP_ERR_AUTH_INVALID", async () => {
    const none = await postJson(`${locked.url}/v1/models/churn-tree/predict`, body);
    assert.equal(none.status, 401);
    assert.equal(none.body.error.code, "MP_ERR_AUTH_REQUIRED");
    const wrong = await postJson(`${locked.url}/v1/models/churn-tree/predict`, body, {
      authorization: "Bearer nope",
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.code, "MP_ERR_AUTH_INVALID");
    const basic = await postJson(`${locked.url}/v1/models/churn-tree/predict`, body, {
      authorization: `Basic ${KEY}`,
    });
    assert.equal(basic.status, 401);
  });

  it("on: either configured key works on every API route", async () => {
    for (const key of [KEY, "other-key-123"]) {
      const ok = await postJson(`${locked.url}/v1/models/churn-tree/predict`, body, {
        authorization: `Bearer ${key}`,
      });
      assert.equal(ok.status, 200);
    }
    for (const path of ["/v1/models", "/v2/models/churn-tree", "/metrics", "/openapi.json", "/docs", "/v2"]) {
      assert.equal((await fetch(`${locked.url}${path}`)).status, 401, path);
      assert.equal(
        (await fetch(`${locked.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } })).status,
        200,
        path,
      );
    }
  });

  it("on: a WebSocket upgrade refused with 401 is not left counted as in flight (drain would wait for it)", async () => {
    const before = locked.server.inFlight();
    for (let i = 0; i < 3; i++) {
      const ws = new WebSocket(`${locked.url.replace("http", "ws")}/v1/jobs/ws`);
      const status = await new Promise<number>((resolve, reject) => {
        ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.once("open", () => reject(new Error("the upgrade was accepted without a key")));
        ws.once("error", reject);
      });
      assert.equal(status, 401);
      ws.terminate();
    }
    // The refusals are answered; the count must come back to where it was, not stay raised.
    for (let i = 0; i < 200 && locked.server.inFlight() !== before; i++)
      await new Promise((r) => setTimeout(r, 25));
    assert.equal(locked.server.inFlight(), before);
  });

  it("on: probes stay open for the orchestrator", async () => {
    for (const path of ["/livez", "/readyz", "/v2/health/live", "/v2/health/ready"]) {
      assert.equal((await fetch(`${locked.url}${path}`)).status, 200, path);
    }
  });
});
