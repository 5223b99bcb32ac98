// A job result redirected to a blob URL (S3's presigned URL): the client follows the 302, sends
// the API key again to the server's own origin but never to another origin, where a presigned
// URL needs no key (and S3 refuses a request carrying two kinds of authorization).
import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { createClient } from "../../client/index.js";

const RESULT = { model: "m", model_version: "1", outputs: { y: [2] } };
let api: Server;
let blobs: Server;
let apiUrl: string;
let blobUrl: string;
const apiSeen: { url: string; headers: IncomingHttpHeaders }[] = [];
const blobSeen: { url: string; headers: IncomingHttpHeaders }[] = [];

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

before(async () => {
  blobs = createServer((req, res) => {
    blobSeen.push({ url: req.url!, headers: req.headers });
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(RESULT));
  });
  blobUrl = await listen(blobs);
  api = createServer((req, res) => {
    apiSeen.push({ url: req.url!, headers: req.headers });
    if (req.url === "/v1/jobs/far/result") {
      res.writeHead(302, { location: `${blobUrl}/bucket/far?X-Amz-Signature=abc` }).end();
    } else if (req.url === "/v1/jobs/near/result") {
      res.writeHead(302, { location: "/blobs/near" }).end();
    } else {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(RESULT));
    }
  });
  apiUrl = await listen(api);
});

after(() => {
  api.close();
  blobs.close();
});

describe("job results behind a redirect", () => {
  it("to another origin: followed without the Authorization header or the client's own headers", async () => {
    const client = createClient({ baseUrl: apiUrl, apiKey: "secret-key", headers: { "x-tenant": "t1" } });
    const result = await client.jobs.result("far", { requestId: "rid-1" });
    assert.deepEqual(result, RESULT);
    assert.equal(apiSeen.at(-1)!.headers.authorization, "Bearer secret-key");
    const blob = blobSeen.at(-1)!;
    assert.equal(blob.url, "/bucket/far?X-Amz-Signature=abc");
    assert.equal(blob.headers.authorization, undefined);
    assert.equal(blob.headers["x-tenant"], undefined);
    assert.equal(blob.headers["x-request-id"], undefined);
  });

  it("to the server's own origin: followed with the Authorization header", async () => {
    const client = createClient({ baseUrl: apiUrl, apiKey: "secret-key" });
    const response = await client.jobs.resultResponse("near");
    assert.deepEqual(await response.json(), RESULT);
    const last = apiSeen.at(-1)!;
    assert.equal(last.url, "/blobs/near");
    assert.equal(last.headers.authorization, "Bearer secret-key");
  });
});
