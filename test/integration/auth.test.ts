// Optional API keys: with keys configured every route but the probes needs a valid bearer
// token; without keys nothing does.
import assert from "node:assert/strict";
import { once } from "node:events";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
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

  it("on: a WebSocket upgrade refused with 401 is closed by the server and not left counted as in flight", async () => {
    const before = locked.server.inFlight();
    const { port } = new URL(locked.url);
    for (let i = 0; i < 3; i++) {
      const socket = connect(Number(port), "127.0.0.1");
      let answer = "";
      socket.on("data", (d) => {
        answer += d;
      });
      socket.write(
        "GET /v1/jobs/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      );
      // The server must end the connection itself: a refused upgrade has left the HTTP parser, so
      // no timeout would ever close it (the client here never does).
      const closedByServer = await Promise.race([
        once(socket, "close").then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 20_000)),
      ]);
      socket.destroy();
      assert.ok(closedByServer, "the server left the refused upgrade's connection open");
      assert.match(answer, /^HTTP\/1\.1 401 /);
      assert.match(answer, /MP_ERR_AUTH_REQUIRED/);
    }
    // The count must come back to where it was, or a drain waits its whole timeout.
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
