// Every kind of bad input gets a 4xx with an MP_ERR_* code and a message naming the input and
// what was expected; never a 500, never a crash, and the server stays ready throughout.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { rawRequest } from "../helpers/raw-http.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;

const MULTI = {
  a: [[1, 2, 3]],
  b: [[0.5, 0.25, 1]],
  ids: [41],
  mask: [true],
  pixels: [[1, 2, 3, 4]],
  scale: 2,
};

before(async () => {
  const models = await testModels();
  const file = join(models, "bad-input.yaml");
  writeFileSync(
    file,
    [
      "limits:",
      "  maxBodyBytes: 4096",
      "  maxBatchRows: 8",
      "models:",
      `  - name: tree`,
      `    path: ${join(models, "churn-tree.onnx")}`,
      `  - name: multi`,
      `    path: ${join(models, "multi-io.onnx")}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(() => srv.close());

async function expectError(
  path: string,
  body: unknown,
  status: number,
  code: string,
  message?: RegExp,
  headers?: Record<string, string>,
): Promise<void> {
  const res = await postJson(`${srv.url}${path}`, body, headers);
  assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 80)} → ${JSON.stringify(res.body)}`);
  const err = path.startsWith("/v2") ? res.body : res.body.error;
  assert.equal(err.code, code);
  if (message) assert.match(path.startsWith("/v2") ? err.error : err.message, message);
}

const TREE = "/v1/models/tree/predict";
const MULTI_PATH = "/v1/models/multi/predict";

describe("bad input", () => {
  it("wrong row width names the input and the expected shape", () =>
    expectError(TREE, { rows: [[1, 2, 3]] }, 400, "MP_ERR_INPUT_SHAPE", /'features'.*\[1, 3\].*\[-1, 6\]/));

  it("ragged rows", () =>
    expectError(
      TREE,
      {
        rows: [
          [1, 2, 3, 4, 5, 6],
          [1, 2],
        ],
      },
      400,
      "MP_ERR_INPUT_SHAPE",
      /rectangular/,
    ));

  it("a string where a number belongs", () =>
    expectError(
      TREE,
      { rows: [[1, 2, "x", 4, 5, 6]] },
      400,
      "MP_ERR_INPUT_DATATYPE",
      /element 2 is the string "x"; expected a number \(FP32\)/,
    ));

  it('non-finite numbers (1e999 parses to Infinity; "NaN" is a string)', async () => {
    await expectError(
      TREE,
      '{"rows":[[1,2,3,4,5,1e999]]}',
      400,
      "MP_ERR_INPUT_NOT_FINITE",
      /'features': element 5/,
    );
    await expectError(TREE, { rows: [[1, 2, 3, 4, 5, "NaN"]] }, 400, "MP_ERR_INPUT_DATATYPE", /"NaN"/);
  });

  it("an empty batch", async () => {
    await expectError(TREE, { rows: [] }, 400, "MP_ERR_INPUT_EMPTY_BATCH");
    await expectError(
      TREE,
      { inputs: { features: { data: [], shape: [0, 6] } } },
      400,
      "MP_ERR_INPUT_EMPTY_BATCH",
    );
  });

  it("too many rows", () =>
    expectError(
      TREE,
      { rows: Array.from({ length: 9 }, () => [1, 2, 3, 4, 5, 6]) },
      413,
      "MP_ERR_INPUT_TOO_MANY_ROWS",
      /9 rows.*at most 8/,
    ));

  it("a body over the size limit", () =>
    expectError(
      TREE,
      { rows: [[1, 2, 3, 4, 5, 6]], pad: "x".repeat(5000) },
      413,
      "MP_ERR_REQUEST_BODY_TOO_LARGE",
      /4096 bytes/,
    ));

  it("malformed JSON", () => expectError(TREE, '{"rows": [[1,2', 400, "MP_ERR_REQUEST_MALFORMED_JSON"));

  it("malformed JSON says what and where once: line and column, never 'not valid JSON' twice", async () => {
    for (const [body, where] of [
      ['{"rows": [[1,2', /; the body ends too soon$/],
      ['{"rows": x}', /Unexpected token 'x' at line 1, column 10$/],
      ['{\n  "rows": [[1, 2, 3, 4, 5, 6]],\n  "outputs": [label]\n}', /at line 3, column 15$/],
      ['{"rows": [[1, 2, 3, 4, 5, 6]]}}', /after the JSON value at line 1, column 31$/],
      ['{"rows": [[1, 2, 3, 4, 5, 6]], "a\\q": 1}', /Bad escaped character at line 1, column 35$/],
    ] as const) {
      const res = await postJson(`${srv.url}${TREE}`, body);
      assert.equal(res.status, 400, body);
      const { code, message, details } = res.body.error;
      assert.equal(code, "MP_ERR_REQUEST_MALFORMED_JSON");
      assert.match(message, where, body);
      assert.equal(message.match(/not valid JSON/g)?.length, 1, message);
      assert.doesNotMatch(message, /content-type/i);
      assert.equal(typeof details.position, "number");
    }
  });

  it("a route served under another method answers 405 with Allow, not 404", async () => {
    const get = await fetch(`${srv.url}${TREE}`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
    const body = (await get.json()) as any;
    assert.equal(body.error.code, "MP_ERR_METHOD_NOT_ALLOWED");
    assert.match(body.error.message, /GET is not served on \/v1\/models\/tree\/predict; it takes POST/);
    const infer = await fetch(`${srv.url}/v2/models/tree/infer`);
    assert.equal(infer.status, 405);
    assert.equal(infer.headers.get("allow"), "POST");
    assert.equal(((await infer.json()) as any).code, "MP_ERR_METHOD_NOT_ALLOWED", "in the OIP shape");
    const models = await fetch(`${srv.url}/v1/models`, { method: "DELETE" });
    assert.equal(models.status, 405);
    assert.equal(models.headers.get("allow"), "GET, HEAD");
    // A path no route serves under any method stays 404.
    assert.equal((await fetch(`${srv.url}/v1/models/tree/nothing`)).status, 404);
  });

  it("an empty JSON body", () => expectError(TREE, "", 400, "MP_ERR_REQUEST_MALFORMED_JSON"));

  it("a wrong content type", async () => {
    await expectError(TREE, "rows=1", 415, "MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE", /application\/json/, {
      "content-type": "text/plain",
    });
    await expectError(TREE, "rows=1", 415, "MP_ERR_REQUEST_UNSUPPORTED_MEDIA_TYPE", undefined, {
      "content-type": "application/x-www-form-urlencoded",
    });
  });

  it("neither rows nor inputs, or both", async () => {
    await expectError(TREE, { data: [1] }, 400, "MP_ERR_REQUEST_INVALID", /exactly one of "rows"/);
    await expectError(TREE, [1, 2], 400, "MP_ERR_REQUEST_INVALID", /JSON object/);
  });

  it("missing and extra inputs", async () => {
    const { scale: _omit, ...noScale } = MULTI;
    await expectError(
      MULTI_PATH,
      { inputs: noScale },
      400,
      "MP_ERR_INPUT_MISSING",
      /'scale' is missing; the model expects FP32 of shape \[\]/,
    );
    await expectError(
      MULTI_PATH,
      { inputs: { ...MULTI, extra: [1] } },
      400,
      "MP_ERR_INPUT_UNKNOWN",
      /'extra'.*'a', 'b'/,
    );
    await expectError(
      TREE,
      { rows: [{ features: [1, 2, 3, 4, 5, 6], age: 3 }] },
      400,
      "MP_ERR_INPUT_UNKNOWN",
      /'age'/,
    );
  });

  it("integer range, booleans and uint8", async () => {
    await expectError(
      MULTI_PATH,
      { inputs: { ...MULTI, ids: [1.5] } },
      400,
      "MP_ERR_INPUT_OUT_OF_RANGE",
      /'ids'.*INT64/,
    );
    await expectError(MULTI_PATH, { inputs: { ...MULTI, ids: [2 ** 60] } }, 400, "MP_ERR_INPUT_OUT_OF_RANGE");
    await expectError(
      MULTI_PATH,
      { inputs: { ...MULTI, pixels: [[1, 2, 3, 256]] } },
      400,
      "MP_ERR_INPUT_OUT_OF_RANGE",
      /0 to 255/,
    );
    await expectError(
      MULTI_PATH,
      { inputs: { ...MULTI, mask: ["yes"] } },
      400,
      "MP_ERR_INPUT_DATATYPE",
      /true or false/,
    );
  });

  it("rows that disagree on dim 0", () =>
    expectError(MULTI_PATH, { inputs: { ...MULTI, ids: [1, 2] } }, 400, "MP_ERR_INPUT_BATCH_MISMATCH"));

  it("unknown model, unknown route, unknown output", async () => {
    await expectError(
      "/v1/models/nope/predict",
      { rows: [[1]] },
      404,
      "MP_ERR_MODEL_NOT_FOUND",
      /served models: tree, multi/,
    );
    const route = await fetch(`${srv.url}/v1/nothing`);
    assert.equal(route.status, 404);
    assert.equal(((await route.json()) as any).error.code, "MP_ERR_ROUTE_NOT_FOUND");
    await expectError(
      TREE,
      { rows: [[1, 2, 3, 4, 5, 6]], outputs: ["proba"] },
      400,
      "MP_ERR_OUTPUT_UNKNOWN",
      /'label', 'probabilities'/,
    );
  });

  it("OIP: wrong datatype, shape that does not fit the data, BYTES, missing fields", async () => {
    const infer = "/v2/models/tree/infer";
    const input = { name: "features", shape: [1, 6], datatype: "FP32", data: [1, 2, 3, 4, 5, 6] };
    await expectError(
      infer,
      { inputs: [{ ...input, datatype: "FP64" }] },
      400,
      "MP_ERR_INPUT_DATATYPE",
      /sent as FP64; the model expects FP32/,
    );
    await expectError(
      infer,
      { inputs: [{ ...input, shape: [2, 6] }] },
      400,
      "MP_ERR_INPUT_SHAPE",
      /needs 12 values but 6 were sent/,
    );
    await expectError(
      infer,
      { inputs: [{ ...input, datatype: "BYTES", data: ["a"] }] },
      400,
      "MP_ERR_DATATYPE_UNSUPPORTED",
    );
    await expectError(
      infer,
      { inputs: [{ name: "features", datatype: "FP32", data: [1] }] },
      400,
      "MP_ERR_REQUEST_INVALID",
      /"shape" is required/,
    );
    await expectError(infer, { inputs: {} }, 400, "MP_ERR_REQUEST_INVALID");
  });

  it("requests fetch() would refuse to send reach the server over a raw socket and get 400", async () => {
    const body = '{"rows":[[3,95,4,1,0,20]]}';
    const head = (lines: string[], path = TREE) =>
      [`POST ${path} HTTP/1.1`, "Host: localhost", "Content-Type: application/json", ...lines, "", ""].join(
        "\r\n",
      );
    // The same channel answers a well-formed request, so the 400s below come from the server's checks.
    const good = await rawRequest(srv.url, head([`Content-Length: ${body.length}`]) + body);
    assert.equal(good.status, 200, good.body);
    assert.deepEqual(JSON.parse(good.body).outputs.label, [1]);
    const malformed: Record<string, string> = {
      "a request line that is not HTTP": "GARBAGE\r\n\r\n",
      "a path that is not origin-form": head([`Content-Length: ${body.length}`], TREE.slice(1)) + body,
      "a header name with a space": head(["Bad Header: x", `Content-Length: ${body.length}`]) + body,
      "a Content-Length that is not a number": head(["Content-Length: abc"]) + body,
      "Content-Length beside Transfer-Encoding":
        head(["Content-Length: 5", "Transfer-Encoding: chunked"]) + body,
      "a NUL byte in a header value":
        head(["X-Request-Timeout-Ms: 1\u00002", `Content-Length: ${body.length}`]) + body,
      "a broken percent-escape in the path": head([`Content-Length: ${body.length}`], `${TREE}%ZZ`) + body,
    };
    for (const [what, request] of Object.entries(malformed)) {
      const res = await rawRequest(srv.url, request);
      assert.equal(res.status, 400, `${what}: ${res.status} ${res.body}`);
      assert.equal(JSON.parse(res.body).error.code, "MP_ERR_REQUEST_INVALID", `${what}: ${res.body}`);
    }
  });

  // Fastify's router refuses these before any route runs; it used to answer with its own body
  // ({"error":"Bad Request","code":"FST_ERR_BAD_URL"}, or 414 FST_ERR_MAX_PARAM_LENGTH) and no
  // MP_ERR_* code. Node's HTTP parser refuses the last two before Fastify sees them.
  it("a malformed URL, an over-long path parameter and bad HTTP get 400 MP_ERR_REQUEST_INVALID in the route's shape", async () => {
    const long = "a".repeat(101);
    const cases: [string, string, "native" | "oip"][] = [
      ["a broken UTF-8 escape in a job id", "GET /v1/jobs/%F2%B5%8D HTTP/1.1", "native"],
      ["a bad escape in a model name", "POST /v1/models/%ZZ/predict HTTP/1.1", "native"],
      ["a bad escape in an OIP model name", "POST /v2/models/%E0%A4%A/infer HTTP/1.1", "oip"],
      ["a job id of 101 characters", `GET /v1/jobs/${long} HTTP/1.1`, "native"],
      ["a model name of 101 characters", `POST /v1/models/${long}/predict HTTP/1.1`, "native"],
      ["an OIP model name of 101 characters", `GET /v2/models/${long}/ready HTTP/1.1`, "oip"],
      ["an OIP version of 101 characters", `POST /v2/models/tree/versions/${long}/infer HTTP/1.1`, "oip"],
    ];
    const raw: [string, string][] = [
      ["a negative Content-Length", `POST ${TREE} HTTP/1.1\r\nContent-Length: -1`],
      ["a control byte in a header", `POST ${TREE} HTTP/1.1\r\nX-Fuzz: a\u0001b\r\nContent-Length: 2`],
    ];
    for (const [what, line, style] of cases) {
      const res = await rawRequest(srv.url, `${line}\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}`);
      assert.equal(res.status, 400, `${what}: ${res.status} ${res.body}`);
      const body = JSON.parse(res.body);
      const code = style === "oip" ? body.code : body.error?.code;
      assert.equal(code, "MP_ERR_REQUEST_INVALID", `${what}: ${res.body}`);
      if (style === "oip") assert.equal(typeof body.error, "string", `${what}: OIP shape ${res.body}`);
      else assert.equal(body.error.retryable, false, `${what}: native shape ${res.body}`);
      assert.ok(res.headers["x-request-id"], `${what}: an X-Request-Id`);
    }
    for (const [what, head] of raw) {
      const res = await rawRequest(
        srv.url,
        `${head}\r\nHost: localhost\r\nContent-Type: application/json\r\n\r\n{}`,
      );
      assert.equal(res.status, 400, `${what}: ${res.status} ${res.body}`);
      assert.equal(JSON.parse(res.body).error.code, "MP_ERR_REQUEST_INVALID", `${what}: ${res.body}`);
    }
    // A parameter of exactly 100 characters is routed as usual.
    const at = await rawRequest(
      srv.url,
      `GET /v1/jobs/${"a".repeat(100)} HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    );
    assert.equal(at.status, 404, at.body);
    assert.equal(JSON.parse(at.body).error.code, "MP_ERR_JOB_NOT_FOUND");
  });

  it("never a 500, and the server stays ready and correct afterwards", async () => {
    const ready = await fetch(`${srv.url}/readyz`);
    assert.equal(ready.status, 200);
    const good = await postJson(`${srv.url}${TREE}`, { rows: [[3, 95, 4, 1, 0, 20]] });
    assert.equal(good.status, 200);
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /modelport_requests_total\{[^}]*status="5\d\d"/);
  });
});

describe("datatypes through HTTP", () => {
  it("int64, float64, bool, uint8 and a scalar input in, each dtype out", async () => {
    const res = await postJson(`${srv.url}${MULTI_PATH}`, {
      inputs: { ...MULTI, ids: [123456789012], mask: [false] },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.outputs, {
      scaled: [[2, 4, 6]],
      b_doubled: [[1, 0.5, 2]],
      ids_next: [123456789013],
      mask_inverted: [true],
      pixel_total: [10],
    });
  });

  it("OIP returns datatypes and flat data", async () => {
    const res = await postJson(`${srv.url}/v2/models/multi/infer`, {
      inputs: [
        { name: "a", shape: [1, 3], datatype: "FP32", data: [1, 2, 3] },
        { name: "b", shape: [1, 3], datatype: "FP64", data: [0.5, 0.25, 1] },
        { name: "ids", shape: [1], datatype: "INT64", data: [7] },
        { name: "mask", shape: [1], datatype: "BOOL", data: [true] },
        { name: "pixels", shape: [1, 4], datatype: "UINT8", data: [1, 2, 3, 4] },
        { name: "scale", shape: [], datatype: "FP32", data: [3] },
      ],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const by = Object.fromEntries(res.body.outputs.map((o: any) => [o.name, o]));
    assert.deepEqual(by.ids_next, { name: "ids_next", datatype: "INT64", shape: [1], data: [8] });
    assert.deepEqual(by.mask_inverted, {
      name: "mask_inverted",
      datatype: "BOOL",
      shape: [1],
      data: [false],
    });
    assert.deepEqual(by.b_doubled.datatype, "FP64");
    assert.deepEqual(by.scaled.data, [3, 6, 9]);
  });
});
