// limits.maxJsonDepth: a body nested far deeper than any API needs ([[[[…]]]], 200,000 levels,
// which once overflowed the stack of a recursive walker and answered 500) is a 400 with an
// MP_ERR_* code on every JSON route, in the route's error style, and the server stays up.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { jsonDepthExceeds } from "../../src/protocol/json-depth.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

const DEEP = 200_000;
const deep = `${"[".repeat(DEEP)}${"]".repeat(DEEP)}`;
let dir: string;
let server: InProcessServer;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-json-depth-"));
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    JSON.stringify({
      limits: { maxJsonDepth: 16 },
      jobs: { sqlitePath: join(dir, "jobs.db"), blobs: { backend: "fs", dir: join(dir, "blobs") } },
      models: [{ name: "churn-tree", path: join(await testModels(), "churn-tree.onnx") }],
    }),
  );
  server = await startInProcess({ file, env: {} });
});
after(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("limits.maxJsonDepth", () => {
  const routes: [string, (inner: string) => string, (body: any) => string][] = [
    ["/v1/models/churn-tree/predict", (d) => `{"rows":${d}}`, (b) => b.error.code],
    ["/v2/models/churn-tree/infer", (d) => `{"inputs":${d}}`, (b) => b.code],
    ["/v1/chat/completions", (d) => `{"model":"m","messages":${d}}`, (b) => b.error.code],
    ["/v1/embeddings", (d) => `{"model":"m","input":${d}}`, (b) => b.error.code],
    ["/v1/models/churn-tree/jobs", (d) => `{"inputs":${d}}`, (b) => b.error.code],
    [
      "/v1/models/churn-tree/jobs",
      (d) => `{"rows":[[1,2,3,1,0,4]],"metadata":{"a":${d}}}`,
      (b) => b.error.code,
    ],
  ];
  for (const [path, wrap, codeOf] of routes) {
    it(`POST ${path} with a 200,000-deep body: 400, server up`, async () => {
      const res = await postJson(`${server.url}${path}`, wrap(deep));
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(codeOf(res.body), "MP_ERR_REQUEST_INVALID");
      assert.match(JSON.stringify(res.body), /maxJsonDepth/);
      assert.equal((await fetch(`${server.url}/livez`)).status, 200);
    });
  }

  // The JSON header of a binary infer body is JSON too. Once it went unchecked: a
  // binary_data_size nested 200,000 deep was quoted with JSON.stringify in the refusal and
  // answered 500; deep tensor data was walked in full before its shape was refused.
  for (const [what, header] of [
    [
      "binary_data_size",
      `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,6],"parameters":{"binary_data_size":${deep}}}]}`,
    ],
    ["data", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,6],"data":${deep}}]}`],
  ]) {
    it(`POST /v2/models/churn-tree/infer with a binary body whose JSON header's ${what} is 200,000 deep: 400`, async () => {
      const res = await fetch(`${server.url}/v2/models/churn-tree/infer`, {
        method: "POST",
        headers: {
          "content-type": "application/octet-stream",
          "inference-header-content-length": String(Buffer.byteLength(header!)),
        },
        body: header,
      });
      const body = (await res.json()) as { error: string; code: string };
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(body.code, "MP_ERR_REQUEST_INVALID");
      assert.match(body.error, /JSON header nests .* deeper than 16 levels \(limits\.maxJsonDepth\)/);
      assert.equal((await fetch(`${server.url}/livez`)).status, 200);
    });
  }

  it("accepts a body exactly at the limit and refuses one level more", async () => {
    // {"rows": [[...]]} is 3 levels; metadata adds its own.
    const nested = (levels: number) => `${"[".repeat(levels)}1${"]".repeat(levels)}`;
    const at = await postJson(
      `${server.url}/v1/models/churn-tree/jobs`,
      `{"rows":[[1,2,3,1,0,4]],"metadata":{"a":${nested(14)}}}`,
    );
    assert.equal(at.status, 202, JSON.stringify(at.body));
    const over = await postJson(
      `${server.url}/v1/models/churn-tree/jobs`,
      `{"rows":[[1,2,3,1,0,4]],"metadata":{"a":${nested(15)}}}`,
    );
    assert.equal(over.status, 400);
    assert.equal(over.body.error.code, "MP_ERR_REQUEST_INVALID");
  });

  it("counts brackets inside strings as text, not nesting", async () => {
    const text = `"${"[{".repeat(100)}\\"]"`;
    const res = await postJson(
      `${server.url}/v1/models/churn-tree/jobs`,
      `{"rows":[[1,2,3,1,0,4]],"metadata":{"note":${text}}}`,
    );
    assert.equal(res.status, 202, JSON.stringify(res.body));
  });
});

describe("prototype poisoning (JSON.parse alone for bodies that cannot spell it)", () => {
  const predict = (body: string) => postJson(`${server.url}/v1/models/churn-tree/jobs`, body);
  const rows = '"rows":[[1,2,3,1,0,4]]';
  // secure-json-parse refuses a __proto__ key, and a constructor key holding a prototype key.
  for (const [what, poison] of [
    ["__proto__", '"__proto__":{"polluted":1}'],
    ["__proto__ with \\u escapes", '"\\u005f_proto\\u005F_":{"polluted":1}'],
    ["constructor.prototype", '"constructor":{"prototype":{"polluted":1}}'],
    ["constructor.prototype with \\u escapes", '"\\u0063onstructor":{"prototype":{"polluted":1}}'],
  ]) {
    it(`a body with a ${what} key is refused 400, as by Fastify's own parser`, async () => {
      const res = await predict(`{${rows},"metadata":{${poison}}}`);
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    });
  }

  it("the words in a value, escapes in strings, and a byte-order mark are still fine", async () => {
    for (const body of [
      `{${rows},"metadata":{"note":"__proto__ and constructor"}}`,
      `{${rows},"metadata":{"note":"a \\"quoted\\" word and a \\n"}}`,
      `\ufeff{${rows}}`,
    ]) {
      const res = await predict(body);
      assert.equal(res.status, 202, `${body}: ${JSON.stringify(res.body)}`);
    }
  });

  it("invalid and empty JSON keep their errors", async () => {
    for (const body of ['{"rows": [[1,2', ""]) {
      const res = await predict(body);
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.match((res.body as { error: { code: string } }).error.code, /^MP_ERR_/);
    }
  });
});

describe("jsonDepthExceeds", () => {
  it("measures the nesting of arrays and objects, skipping strings and escapes", () => {
    assert.equal(jsonDepthExceeds("[[[]]]", 3), false);
    assert.equal(jsonDepthExceeds("[[[[]]]]", 3), true);
    assert.equal(jsonDepthExceeds('{"a":{"b":[1]}}', 3), false);
    assert.equal(jsonDepthExceeds('{"a":{"b":[[1]]}}', 3), true);
    assert.equal(jsonDepthExceeds('["[[[[[[", "\\"[[[[[["]', 1), false);
    assert.equal(jsonDepthExceeds("[[1],[2],[3],[4],[5],[6]]", 2), false);
    assert.equal(
      jsonDepthExceeds('["a\\\\", [1]]', 1),
      true,
      "an even run of backslashes does not escape the quote",
    );
    assert.equal(jsonDepthExceeds('["unterminated [[[[', 1), false);
  });

  it("agrees with a character-by-character reference on any text", () => {
    // The reference walks every character; the function under test jumps between brackets and quotes.
    const reference = (text: string, max: number): boolean => {
      let depth = 0;
      for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (c === "[" || c === "{") {
          if (++depth > max) return true;
        } else if (c === "]" || c === "}") depth--;
        else if (c === '"') {
          for (i++; i < text.length; i++) {
            if (text[i] === "\\") i++;
            else if (text[i] === '"') break;
          }
        }
      }
      return false;
    };
    const text = fc
      .array(fc.constantFrom("[", "]", "{", "}", '"', "\\", "1", ",", "a", " "), { maxLength: 80 })
      .map((cs) => cs.join(""));
    fc.assert(
      fc.property(text, fc.integer({ min: 0, max: 6 }), (t, max) => {
        assert.equal(jsonDepthExceeds(t, max), reference(t, max), JSON.stringify(t));
      }),
      { numRuns: 3000 },
    );
  });
});
