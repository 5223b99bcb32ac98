// The OpenAI Files API for batches end to end (openai-batches-harness.ts: a real listening server
// with a key file, SQLite and the fs blob store): uploads sent as multipart/form-data by FormData
// and by the official `openai` client, every line checked at upload, the size and line limits,
// lists, content, delete, and tenants (another key's file is the same 404 as an unknown one).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toFile } from "openai";
import { ask, chatLine, client, jsonl, setUp, state, upload } from "./openai-batches-harness.js";

before(setUp);
after(() => state.server.close());

describe("POST /v1/files and the file routes", () => {
  it("stores a batch file sent as multipart/form-data and answers OpenAI's FileObject", async () => {
    const content = jsonl([chatLine(0), chatLine(1)]);
    const res = await upload(state.keys.alice!, content, "batch", "requests.jsonl");
    assert.equal(res.status, 200, res.text);
    assert.match(res.body.id, /^file-/);
    assert.equal(res.body.object, "file");
    assert.equal(res.body.bytes, Buffer.byteLength(content));
    assert.equal(res.body.filename, "requests.jsonl");
    assert.equal(res.body.purpose, "batch");
    assert.equal(typeof res.body.created_at, "number");
    const one = await ask("GET", `/v1/files/${res.body.id}`, state.keys.alice!);
    assert.deepEqual(one.body, res.body);
    const back = await ask("GET", `/v1/files/${res.body.id}/content`, state.keys.alice!);
    assert.equal(back.status, 200);
    assert.equal(back.text, content);
  });

  it("works with the openai SDK: files.create, retrieve, list, content, delete", async () => {
    const openai = client(state.keys.alice!);
    const content = jsonl([chatLine(7)]);
    const created = await openai.files.create({
      file: await toFile(Buffer.from(content), "sdk.jsonl"),
      purpose: "batch",
    });
    assert.equal(created.purpose, "batch");
    assert.equal((await openai.files.retrieve(created.id)).filename, "sdk.jsonl");
    const listed = await openai.files.list();
    assert.ok(listed.data.some((f) => f.id === created.id));
    assert.equal(await (await openai.files.content(created.id)).text(), content);
    const deleted = await openai.files.delete(created.id);
    assert.deepEqual(deleted, { id: created.id, object: "file", deleted: true });
    const gone = await ask("GET", `/v1/files/${created.id}`, state.keys.alice!);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, "MP_ERR_FILE_NOT_FOUND");
  });

  it("refuses another purpose, naming it", async () => {
    const res = await upload(state.keys.alice!, jsonl([chatLine(0)]), "fine-tune");
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, "MP_ERR_REQUEST_INVALID");
    assert.equal(res.body.error.param, "purpose");
  });

  it("refuses a bad line at upload, naming the line", async () => {
    const cases: [string, RegExp][] = [
      [`${JSON.stringify(chatLine(0))}\nnot json\n`, /line 2: not valid JSON/],
      [jsonl([chatLine(0), { ...chatLine(1), method: "GET" }]), /line 2: "method"/],
      [jsonl([{ ...chatLine(0), url: "/v1/images" }]), /line 1: "url" must be one of/],
      [jsonl([chatLine(0), chatLine(0)]), /line 2: "custom_id" "chat-0" repeats/],
      [jsonl([{ ...chatLine(0), body: "text" }]), /line 1: "body" must be a JSON object/],
      [jsonl([{ method: "POST", url: "/v1/completions", body: {} }]), /line 1: "custom_id"/],
      ["\n\n", /holds no request/],
    ];
    for (const [content, message] of cases) {
      const res = await upload(state.keys.alice!, content);
      assert.equal(res.status, 400, content);
      assert.equal(res.body.error.code, "MP_ERR_FILE_INVALID");
      assert.match(res.body.error.message, message);
    }
  });

  it("refuses a file over the limits: 413 for bytes, 400 for lines", async () => {
    const big = await upload(state.keys.alice!, "x".repeat(65_537));
    assert.equal(big.status, 413, big.text);
    assert.equal(big.body.error.code, "MP_ERR_FILE_TOO_LARGE");
    const many = await upload(state.keys.alice!, jsonl(Array.from({ length: 41 }, (_, i) => chatLine(i))));
    assert.equal(many.status, 400);
    assert.equal(many.body.error.code, "MP_ERR_FILE_INVALID");
    assert.match(many.body.error.message, /more than 40 requests \(jobs\.batches\.maxFileLines\)/);
  });

  it("refuses a body that is no multipart form", async () => {
    const res = await fetch(`${state.server.url}/v1/files`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${state.keys.alice}`,
        "content-type": "multipart/form-data; boundary=abc",
      },
      body: '--abc\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n',
    });
    const body = (await res.json()) as any;
    assert.equal(res.status, 400);
    assert.equal(body.error.code, "MP_ERR_REQUEST_INVALID");
    const noFile = new FormData();
    noFile.append("purpose", "batch");
    const res2 = await fetch(`${state.server.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${state.keys.alice}` },
      body: noFile,
    });
    assert.equal(res2.status, 400);
    assert.equal(((await res2.json()) as any).error.param, "file");
  });

  it("lists newest first with after and limit", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await upload(state.keys.bob!, jsonl([chatLine(i)]))).body.id);
    const page = await ask("GET", "/v1/files?limit=2", state.keys.bob!);
    assert.equal(page.body.object, "list");
    assert.deepEqual(
      page.body.data.map((f: any) => f.id),
      [ids[2], ids[1]],
    );
    assert.equal(page.body.has_more, true);
    const rest = await ask("GET", `/v1/files?limit=2&after=${ids[1]}`, state.keys.bob!);
    assert.deepEqual(
      rest.body.data.map((f: any) => f.id),
      [ids[0]],
    );
    assert.equal(rest.body.has_more, false);
    const bad = await ask("GET", "/v1/files?limit=0", state.keys.bob!);
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "limit");
  });

  it("shows a key only its own files: another key's id is the same 404 as an unknown one", async () => {
    const mine = (await upload(state.keys.alice!, jsonl([chatLine(3)]))).body.id as string;
    const unknown = await ask("GET", "/v1/files/file-0000", state.keys.bob!);
    for (const path of [`/v1/files/${mine}`, `/v1/files/${mine}/content`]) {
      const res = await ask("GET", path, state.keys.bob!);
      assert.equal(res.status, 404);
      assert.deepEqual(res.body.error, { ...unknown.body.error, message: res.body.error.message });
      assert.equal(res.body.error.message, `no file '${mine}'`);
    }
    const del = await ask("DELETE", `/v1/files/${mine}`, state.keys.bob!);
    assert.equal(del.status, 404);
    const listed = await ask("GET", "/v1/files", state.keys.bob!);
    assert.ok(!listed.body.data.some((f: any) => f.id === mine));
    // The admin key sees every key's files.
    assert.equal((await ask("GET", `/v1/files/${mine}`, state.keys.admin!)).status, 200);
    assert.equal((await ask("GET", `/v1/files/${mine}`, state.keys.alice!)).status, 200);
    // An admin deleting another key's file is an admin action: the audit log has it.
    assert.equal((await ask("DELETE", `/v1/files/${mine}`, state.keys.admin!)).status, 200);
    assert.ok(
      state.server.logs.some(
        (l) => l.log === "audit" && l.action === "file.delete" && l.target === mine && l.key === "ops",
      ),
      "an audit line for the admin's delete",
    );
    assert.equal((await ask("GET", `/v1/files/${mine}`, state.keys.alice!)).status, 404);
  });
});
