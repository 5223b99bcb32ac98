// multipart/form-data bodies (src/server/multipart-body.ts) as fetch's FormData encodes them, the
// way the openai SDK sends an upload: fields and a file come back byte for byte, including file
// bytes that look like delimiters; quoted and RFC 5987 filenames; bodies that are no form are a
// 400 naming what is wrong.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isModelportError } from "../../src/errors.js";
import { boundaryOf, parseMultipart } from "../../src/server/multipart-body.js";

async function encode(form: FormData): Promise<{ body: Buffer; type: string }> {
  const res = new Response(form);
  return { body: Buffer.from(await res.arrayBuffer()), type: res.headers.get("content-type")! };
}

const refused = (fn: () => unknown, message: RegExp) =>
  assert.throws(
    fn,
    (err) => isModelportError(err) && err.code === "MP_ERR_REQUEST_INVALID" && message.test(err.message),
  );

describe("parseMultipart", () => {
  it("gives back FormData's fields and file byte for byte", async () => {
    const tricky = Buffer.concat([
      Buffer.from("a\r\n--not-the-boundary\r\n\r\n"),
      Buffer.from([0, 255, 13, 10, 45, 45]),
    ]);
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("file", new Blob([tricky], { type: "application/jsonl" }), "requests.jsonl");
    const { body, type } = await encode(form);
    const parts = parseMultipart(body, type);
    assert.equal(parts.length, 2);
    assert.deepEqual(
      { name: parts[0]!.name, filename: parts[0]!.filename, data: parts[0]!.data.toString() },
      { name: "purpose", filename: undefined, data: "batch" },
    );
    assert.equal(parts[1]!.name, "file");
    assert.equal(parts[1]!.filename, "requests.jsonl");
    assert.equal(parts[1]!.contentType, "application/jsonl");
    assert.ok(parts[1]!.data.equals(tricky));
  });

  it("reads quoted and RFC 5987 filenames, and an empty file", () => {
    const body = Buffer.from(
      [
        "preamble",
        "--b1",
        'Content-Disposition: form-data; name="file"; filename="a \\"b\\".jsonl"',
        "",
        "",
        "--b1",
        "Content-Disposition: form-data; name=\"other\"; filename*=UTF-8''caf%C3%A9.jsonl",
        "",
        "x",
        "--b1--",
        "",
      ].join("\r\n"),
    );
    const parts = parseMultipart(body, 'multipart/form-data; boundary="b1"');
    assert.equal(parts[0]!.filename, 'a "b".jsonl');
    assert.equal(parts[0]!.data.length, 0);
    assert.equal(parts[1]!.filename, "café.jsonl");
    assert.equal(parts[1]!.data.toString(), "x");
  });

  it("refuses what is no form", () => {
    refused(() => boundaryOf("multipart/form-data"), /names no boundary/);
    refused(() => parseMultipart(Buffer.from("hello"), "multipart/form-data; boundary=b"), /no part starts/);
    refused(
      () =>
        parseMultipart(
          Buffer.from('--b\r\nContent-Disposition: form-data; name="a"\r\n\r\nv'),
          "multipart/form-data; boundary=b",
        ),
      /ends before its closing boundary/,
    );
    refused(
      () =>
        parseMultipart(
          Buffer.from("--b\r\nContent-Type: text/plain\r\n\r\nv\r\n--b--"),
          "multipart/form-data; boundary=b",
        ),
      /no Content-Disposition/,
    );
    refused(
      () =>
        parseMultipart(
          Buffer.from("--b\r\nContent-Disposition: form-data; name=a"),
          "multipart/form-data; boundary=b",
        ),
      /headers do not end/,
    );
  });
});
