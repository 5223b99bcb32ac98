// limits.maxBodyBytesInFlight through a listening server: bodies held by requests in progress
// count against it from the moment a request is let in until its response ends; a request whose
// body would pass it is refused with 503 MP_ERR_SERVER_BUSY before its body is read, and the
// budget comes back as responses end. The gate model holds requests while the test looks.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createGate } from "../helpers/gate.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const MAX_BODY = 200_000;
const BUDGET = 300_000;
const gate = createGate();
let srv: InProcessServer;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelport-body-budget-"));
  const file = join(dir, "budget.yaml");
  writeFileSync(
    file,
    [
      `limits: {maxBodyBytes: ${MAX_BODY}, maxBodyBytesInFlight: ${BUDGET}}`,
      "models:",
      gate.modelYaml("held"),
    ].join("\n"),
  );
  srv = await startInProcess({ file, env: {} });
});

after(async () => {
  gate.openAll();
  await srv?.close();
});

/** A predict body for row value `x`, padded with spaces (valid JSON) to `bytes`. */
const body = (x: number, bytes = 0) => {
  const json = JSON.stringify({ rows: [[x]] });
  return json + " ".repeat(Math.max(0, bytes - json.length));
};
const predict = (x: number, bytes = 0) => postJson(`${srv.url}/v1/models/held/predict`, body(x, bytes));

/** A predict sent chunked: no Content-Length, so it reserves limits.maxBodyBytes. */
function chunked(x: number): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${srv.url}/v1/models/held/predict`,
      { method: "POST", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.write(body(x).slice(0, 5));
    req.end(body(x).slice(5));
  });
}

describe("limits.maxBodyBytesInFlight", () => {
  it("refuses bodies that would pass the budget while others are held, and gives the budget back as responses end", async () => {
    // 150 KB held by a request the gate keeps in progress.
    const big = predict(1, 150_000);
    await gate.started(1);

    // 150 KB + 200 KB declared > 300 KB: refused before the body is read, with Retry-After.
    const refused = await predict(2, MAX_BODY - 10);
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, "MP_ERR_SERVER_BUSY");
    assert.match(refused.body.error.message, /limits\.maxBodyBytesInFlight: 300000/);
    assert.equal(refused.headers.get("retry-after"), "1");
    // A chunked body may grow to limits.maxBodyBytes, so it reserves that: refused too.
    const refusedChunked = await chunked(3);
    assert.equal(refusedChunked.status, 503);
    assert.equal(refusedChunked.body.error.code, "MP_ERR_SERVER_BUSY");

    // A small body still fits beside the held one.
    gate.open(4);
    const small = await predict(4);
    assert.equal(small.status, 200, JSON.stringify(small.body));
    assert.deepEqual(small.body.outputs.y, [[8]]);

    // The held request ends: its 150 KB come back, and a near-limit body and a chunked one pass.
    gate.open(1);
    assert.equal((await big).status, 200);
    gate.open(5);
    gate.open(6);
    const after = [await predict(5, MAX_BODY - 10), await chunked(6)];
    assert.deepEqual(
      after.map((a) => a.status),
      [200, 200],
      JSON.stringify(after.map((a) => a.body)),
    );
    // Bodyless requests never count.
    assert.equal((await fetch(`${srv.url}/v1/models/held`)).status, 200);
  });

  it("a binary body announced and never sent holds its Content-Length until its connection closes", async () => {
    // The binary reader allocates a body's Content-Length when reading starts; the budget reserved
    // that when the request was let in, so clients that announce and stall hold no more.
    const { hostname, port } = new URL(srv.url);
    const stall = async (attempt: number) => {
      const socket = connect(Number(port), hostname);
      socket.on("error", () => {});
      await new Promise((res) => socket.once("connect", res));
      socket.write(
        `POST /v1/models/held/predict HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/octet-stream\r\n` +
          `Content-Length: ${MAX_BODY}\r\n\r\n${"x".repeat(1000)}`,
      );
      // The server shares this process: a moment for it to accept the connection and read.
      await new Promise((res) => setTimeout(res, 20 * (attempt + 1)));
      return socket;
    };
    gate.open(7);
    // While the server holds it, a second body of that size passes the budget. Whichever the
    // server lets in first holds the budget: when the second one came first (answered at once,
    // its gate is open), the stalled one is sent again.
    for (let attempt = 0; ; attempt++) {
      const stalled = await stall(attempt);
      try {
        const r = await predict(7, MAX_BODY - 10);
        if (r.status === 503) {
          assert.equal(r.body.error.code, "MP_ERR_SERVER_BUSY");
          assert.match(r.body.error.message, new RegExp(`hold ${MAX_BODY} bytes`));
          break;
        }
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.ok(attempt < 20, "the stalled body was never held");
      } finally {
        stalled.destroy();
      }
    }
    // Its connection gone, the budget comes back.
    gate.open(8);
    for (let i = 0; ; i++) {
      const r = await predict(8, MAX_BODY - 10);
      if (r.status === 200) break;
      assert.equal(r.status, 503, JSON.stringify(r.body));
      assert.ok(i < 200, "the stalled body's budget never came back");
      await new Promise((res) => setTimeout(res, 25));
    }
    assert.equal((await fetch(`${srv.url}/readyz`)).status, 200);
  });
});
