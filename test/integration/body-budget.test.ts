// limits.maxBodyBytesInFlight through a listening server: bodies held by requests in progress
// count against it from the moment a request is let in until its response ends; a request whose
// body would pass it is refused with 503 MP_ERR_SERVER_BUSY before its body is read, and the
// budget comes back as responses end. The gate model holds requests while the test looks.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
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
});
