// The model label of modelport_requests_total names served models only: requests for 200
// random model names (404s, and 401s refused before auth) add no series per name, so a
// scanner cannot grow /metrics without bound.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const KEY = "metrics-cardinality-key";
const auth = { authorization: `Bearer ${KEY}` };
/** /metrics read with an admin key: every series (a client key reads only its own). */
const ADMIN = "metrics-cardinality-admin-key";
const admin = { authorization: `Bearer ${ADMIN}` };
let server: InProcessServer;

before(async () => {
  server = await startInProcess({
    modelPath: join(await testModels(), "churn-tree.onnx"),
    flags: { apiKeys: [KEY], adminKeys: [ADMIN] },
    env: {},
  });
});
after(() => server.close());

/** The distinct values of the model label on modelport_requests_total. */
async function modelLabels(): Promise<Set<string>> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: admin })).text();
  const labels = new Set<string>();
  for (const m of text.matchAll(/^modelport_requests_total\{[^}]*model="([^"]*)"/gm)) labels.add(m[1]!);
  return labels;
}

describe("metrics cardinality", () => {
  it("200 random model names (404 and 401) add no model label values", async () => {
    const ok = await postJson(
      `${server.url}/v1/models/churn-tree/predict`,
      { rows: [[1, 2, 3, 1, 0, 4]] },
      auth,
    );
    assert.equal(ok.status, 200);
    const names: string[] = [];
    for (let i = 0; i < 200; i++) names.push(`m${randomBytes(6).toString("hex")}`);
    for (const [i, name] of names.entries()) {
      const path = i % 2 === 0 ? `/v1/models/${name}/predict` : `/v2/models/${name}/infer`;
      const found = await postJson(`${server.url}${path}`, { rows: [[1]] }, auth);
      assert.equal(found.status, 404);
      const refused = await postJson(`${server.url}${path}`, { rows: [[1]] });
      assert.equal(refused.status, 401);
    }
    // 401 for a served model before auth: not labelled with it either.
    const refusedServed = await postJson(`${server.url}/v1/models/churn-tree/predict`, { rows: [[1]] });
    assert.equal(refusedServed.status, 401);
    const labels = await modelLabels();
    for (const name of names) assert.ok(!labels.has(name), `${name} became a label value`);
    assert.deepEqual([...labels].sort(), ["", "churn-tree"]);
    const text = await (await fetch(`${server.url}/metrics`, { headers: admin })).text();
    assert.match(
      text,
      /modelport_requests_total\{model="churn-tree",route="\/v1\/models\/:model\/predict",status="200"\} 1/,
    );
    assert.doesNotMatch(text, /modelport_requests_total\{model="churn-tree",[^}]*status="401"/);
  });
});
