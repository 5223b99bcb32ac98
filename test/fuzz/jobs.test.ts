// Fuzzes the jobs API of a real `modelport serve` process: submits (mutated bodies,
// Idempotency-Key, Prefer: respond-async), reads (get with wait, result, list with cursors,
// cancel, retry, events) with real and garbage ids, and WebSocket frames on /v1/jobs/ws (text
// and binary, random JSON and garbage). Every HTTP answer is a 2xx/3xx or a coded 4xx in the
// native shape; every WebSocket message is a JSON job or error message.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import WebSocket from "ws";
import { edgeString, encode, type Json, mutated, rows, wellFormed } from "./arbitraries.js";
import { check, checkAnswer, postJson, send, useFuzzServer } from "./harness.js";

async function warm(url: string): Promise<void> {
  const res = await postJson(url, "/v1/models/tree/jobs", { rows: [[1, 2, 3, 4, 5, 6]] });
  const id = (res.json as { id: string }).id;
  await send(url, "GET", `/v1/jobs/${id}?wait=1`);
  await send(url, "GET", `/v1/jobs/${id}/result`);
  await send(url, "GET", "/v1/jobs?limit=2");
}

const server = useFuzzServer({ warm });

/** Ids of jobs the fuzzer made, for the read cases to use besides garbage ids. */
const ids: string[] = [];

const jobBody: fc.Arbitrary<Json> = fc.record(
  {
    rows: rows(6, 3),
    callback_url: fc.constantFrom(
      "http://127.0.0.1:1/hook",
      "ftp://x/y",
      "not a url",
      "http://[::1]/",
      "http://10.0.0.1/",
      "",
    ),
    metadata: fc.dictionary(
      fc.string({ maxLength: 8 }),
      fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
      {
        maxKeys: 4,
      },
    ),
    priority: fc.integer({ min: -1000, max: 1000 }),
  },
  { requiredKeys: ["rows"] },
) as fc.Arbitrary<Json>;

// Latin-1 only: Node's HTTP client refuses other header characters (raw sockets send those,
// in headers.test.ts).
const headerText = fc.oneof(
  fc.string({ unit: "binary-ascii", maxLength: 40 }).map((s) => s.replace(/[^\t\x20-\x7e]/g, "")),
  fc.constantFrom("", " ", "k", "x".repeat(255), "x".repeat(256), "é", "a b", "key\t1"),
);

describe("jobs", () => {
  // Metadata nested up to 20,000 deep included: limits.maxJsonDepth refuses it before parsing.
  it("submits with mutated bodies, Idempotency-Key and Prefer get a coded 4xx or 200/202 with a job", () =>
    check(
      "jobsSubmit",
      fc.asyncProperty(
        fc.oneof(jobBody, mutated(jobBody)),
        fc.constantFrom("tree", "multi", "nope"),
        fc.option(headerText, { nil: undefined }),
        fc.boolean(),
        async (body, model, key, viaPrefer) => {
          const headers: Record<string, string> = {};
          if (key !== undefined) headers["idempotency-key"] = key;
          if (viaPrefer) headers.prefer = "respond-async";
          const path = viaPrefer ? `/v1/models/${model}/predict` : `/v1/models/${model}/jobs`;
          const res = await postJson(server.url, path, body, headers);
          checkAnswer(res, "native", {
            what: `${path} ${JSON.stringify(headers)} ${encode(body).slice(0, 300)}`,
          });
          // 202: accepted; 200: the same Idempotency-Key again. Both answer with the job.
          if (res.status === 202 || res.status === 200) {
            const id = (res.json as { id?: unknown }).id;
            assert.equal(typeof id, "string", `a job id in ${res.text.slice(0, 200)}`);
            if (ids.length < 200) ids.push(id as string);
          }
        },
      ),
    ));

  it("reads, lists with cursors, cancels and retries with real and garbage ids get a coded 4xx or 2xx", () =>
    check(
      "jobsRead",
      fc.asyncProperty(
        fc.oneof(
          fc.nat().map((i) => ids[i % Math.max(1, ids.length)] ?? "none"),
          // Any string, encoded: up to 5,000 characters, so also over the router's 100-character
          // parameter limit.
          edgeString.map((s) => encodeURIComponent(wellFormed(s))),
          // "ws" is the WebSocket route's own path (a plain GET there is a coded 426); the
          // escapes that do not decode (cut, or not UTF-8) are refused by the router.
          fc.constantFrom(
            "..",
            "%2e%2e",
            "%00",
            "w%73x",
            "ws",
            "%F2%B5%8D",
            "%E0%A4%A",
            "%ZZ",
            "%",
            "00000000-0000-0000-0000-000000000000",
          ),
        ),
        fc.constantFrom("get", "wait", "result", "cancel", "retry", "events", "list", "page"),
        fc.oneof(
          fc.constantFrom("0", "0.1", "-1", "61", "NaN", "1e3", "", "abc", "0x1"),
          fc.integer({ min: -5, max: 2000 }).map(String),
        ),
        fc.oneof(
          fc.constant(undefined),
          fc.constantFrom("queued", "running", "succeeded", "failed", "canceled", "QUEUED", "", "x"),
        ),
        fc.option(fc.string({ unit: "binary-ascii", maxLength: 30 }), { nil: undefined }),
        async (id, action, number, status, cursor) => {
          let res: Awaited<ReturnType<typeof send>>;
          const q = (params: Record<string, string | undefined>) =>
            Object.entries(params)
              .filter(([, v]) => v !== undefined)
              .map(([k, v]) => `${k}=${encodeURIComponent(wellFormed(v!))}`)
              .join("&");
          switch (action) {
            case "get":
              res = await send(server.url, "GET", `/v1/jobs/${id}`);
              break;
            case "wait":
              // At most a fraction of a second of waiting per case: the jobs finish in ms anyway.
              res = await send(
                server.url,
                "GET",
                `/v1/jobs/${id}?wait=${Math.min(0.2, Math.abs(Number(number)) || 0)}`,
              );
              break;
            case "result":
              res = await send(server.url, "GET", `/v1/jobs/${id}/result`);
              break;
            case "cancel":
              res = await send(server.url, "DELETE", `/v1/jobs/${id}`);
              break;
            case "retry":
              res = await send(server.url, "POST", `/v1/jobs/${id}/retry`);
              break;
            case "events": {
              // Only for ids no job has (404) or that are final: a live stream would run on.
              const job = await send(server.url, "GET", `/v1/jobs/${id}`);
              const state = (job.json as { status?: string } | undefined)?.status;
              if (job.status === 200 && state !== "succeeded" && state !== "failed" && state !== "canceled")
                return;
              res = await send(server.url, "GET", `/v1/jobs/${id}/events`);
              break;
            }
            case "list":
              res = await send(server.url, "GET", `/v1/jobs?${q({ limit: number, status, cursor })}`);
              break;
            default: {
              // Follow next_cursor for a few pages; every page is an answer and ids never repeat.
              const seen = new Set<string>();
              let next: string | undefined;
              res = await send(server.url, "GET", `/v1/jobs?${q({ limit: "3", status })}`);
              for (let page = 0; page < 4 && res.status === 200; page++) {
                const body = res.json as { jobs: { id: string }[]; next_cursor?: string };
                for (const j of body.jobs) {
                  assert.ok(!seen.has(j.id), `job ${j.id} listed twice across pages`);
                  seen.add(j.id);
                }
                next = body.next_cursor;
                if (!next) break;
                res = await send(server.url, "GET", `/v1/jobs?${q({ limit: "3", status, cursor: next })}`);
              }
              checkAnswer(res, "native", { what: `page ${status} ${next}` });
              // Then a damaged cursor: cut and with garbage appended.
              if (next && cursor) {
                const damaged = next.slice(0, cursor.length % next.length) + cursor;
                res = await send(server.url, "GET", `/v1/jobs?${q({ limit: "3", status, cursor: damaged })}`);
              }
            }
          }
          checkAnswer(res, "native", { what: `${action} ${id} ${number} ${status} ${cursor}` });
        },
      ),
    ));
});

/** Frames a client might send: valid subscribes, random JSON, garbage text and binary. */
const frame: fc.Arbitrary<{ data: string | Uint8Array; binary: boolean }> = fc.oneof(
  fc
    .record({
      subscribe: fc.array(
        fc.oneof(
          fc.nat().map((i) => ids[i % Math.max(1, ids.length)] ?? "x"),
          edgeString,
        ),
        {
          maxLength: 4,
        },
      ),
    })
    .map((m) => ({ data: JSON.stringify(m), binary: false })),
  fc
    .record({ unsubscribe: fc.array(edgeString, { maxLength: 3 }) })
    .map((m) => ({ data: JSON.stringify(m), binary: false })),
  // JSON of every kind, objects and not (null, 5, "x", [] once ended the process).
  fc
    .dictionary(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 3 })
    .map((m) => ({ data: JSON.stringify(m), binary: false })),
  fc.jsonValue({ maxDepth: 3 }).map((v) => ({ data: JSON.stringify(v) ?? "null", binary: false })),
  fc.string({ unit: "binary", maxLength: 60 }).map((s) => ({ data: s, binary: false })),
  fc.uint8Array({ maxLength: 200 }).map((b) => ({ data: b, binary: true })),
);

describe("jobs WebSocket", () => {
  it("frames of any kind get JSON job or error messages back and the connection keeps working", () =>
    check(
      "wsFrames",
      fc.asyncProperty(fc.array(frame, { minLength: 1, maxLength: 6 }), async (frames) => {
        const ws = new WebSocket(`${server.url.replace("http", "ws")}/v1/jobs/ws`);
        const messages: unknown[] = [];
        const marker = `fuzz-end-${Math.random()}`;
        const done = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error("no answer to the closing subscribe in 10 s")),
            10_000,
          );
          ws.on("message", (raw: Buffer) => {
            let msg: { type?: string; id?: string; code?: string };
            try {
              msg = JSON.parse(String(raw));
            } catch {
              reject(new Error(`a message that is not JSON: ${String(raw).slice(0, 200)}`));
              return;
            }
            messages.push(msg);
            if (msg.type === "error" && msg.id === marker) {
              clearTimeout(timer);
              resolve();
            }
          });
          ws.on("error", reject);
          ws.on("close", (code) =>
            reject(new Error(`closed with ${code} before the closing subscribe was answered`)),
          );
        });
        await new Promise<void>((resolve, reject) => {
          ws.once("open", resolve);
          ws.once("error", reject);
        });
        for (const f of frames) ws.send(f.data, { binary: f.binary });
        // Messages are handled in order: the answer to this one means all before it were handled.
        ws.send(JSON.stringify({ subscribe: [marker] }));
        try {
          await done;
        } finally {
          ws.removeAllListeners("close");
          ws.terminate();
        }
        for (const m of messages as { type?: string; code?: unknown }[]) {
          assert.ok(
            m.type === "job" || m.type === "error",
            `message type: ${JSON.stringify(m).slice(0, 200)}`,
          );
          if (m.type === "error" && m.code !== undefined) assert.match(String(m.code), /^MP_ERR_/);
        }
      }),
    ));
});

server.finalCheck();
