// Webhooks against a real HTTP receiver on 127.0.0.1 (allowed through allowPrivate): Standard
// Webhooks signatures checked by the standardwebhooks library as the receiver (a replay under another
// id fails), MODELPORT_WEBHOOK_SECRET through a real server, the deprecated signature that verifies
// and fails when it should, retries on 5xx, timeouts and 429 with Retry-After, no
// retry on other 4xx, one delivery id across retries, the SSRF refusals (private, loopback,
// link-local, metadata, localhost, other schemes, every range that embeds or translates IPv4),
// the DNS time limit, and delivery pinned to the checked address.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Webhook } from "standardwebhooks";
import { jobsSchema } from "../../src/config/schema.js";
import { isModelportError } from "../../src/errors.js";
import type { WebhookState } from "../../src/notify/webhook.js";
import {
  allowPrivateProblems,
  checkCallbackUrl,
  type DeliverWebhookOptions,
  deliverWebhook,
  privateKind,
  resolveWebhookSecret,
  signStandardWebhook,
  signWebhook,
  verifyWebhook,
  webhookKey,
} from "../../src/notify/webhook.js";
import { VERSION } from "../../src/version.js";
import { testModels } from "../helpers/models.js";
import { postJson, startInProcess } from "../helpers/server.js";

const SECRET = "whsec-test-0123456789abcdef";
const LOOPBACK = ["127.0.0.1"];

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

type Reply = (res: ServerResponse, n: number, req: IncomingMessage) => void;

/** One receiver for the file; each test sets how it answers (by request number) and reads what came. */
const receiver = {
  url: "",
  received: [] as Received[],
  reply: ((res) => res.end("ok")) as Reply,
  reset(reply: Reply) {
    this.received = [];
    this.reply = reply;
  },
};
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    receiver.received.push({
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      body: Buffer.concat(chunks).toString("utf8"),
    });
    receiver.reply(res, receiver.received.length, req);
  });
});

before(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  server.close();
});

const status =
  (code: number, headers: Record<string, string> = {}): Reply =>
  (res) => {
    res.writeHead(code, headers);
    res.end(String(code));
  };

/** Fast settings: no real waiting between attempts unless a test wants it. */
function fast(extra: Partial<DeliverWebhookOptions> & { url: string }): DeliverWebhookOptions & {
  sleeps: number[];
  attempts: WebhookState[];
} {
  const sleeps: number[] = [];
  const attempts: WebhookState[] = [];
  return {
    body: { event: "job.finished", job: { id: "job-1", status: "succeeded" } },
    secret: SECRET,
    timeoutMs: 2000,
    maxAttempts: 5,
    allowPrivate: LOOPBACK,
    backoffBaseMs: 10,
    backoffMaxMs: 40,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    onAttempt: (s) => {
      attempts.push(s);
    },
    ...extra,
    sleeps,
    attempts,
  };
}

async function refusal(
  promise: Promise<unknown>,
): Promise<{ message: string; details?: Record<string, unknown> }> {
  try {
    await promise;
  } catch (err) {
    assert.ok(isModelportError(err), `expected a ModelportError, got ${String(err)}`);
    assert.equal(err.code, "MP_ERR_JOB_CALLBACK_REFUSED");
    return { message: err.message, ...(err.details ? { details: err.details } : {}) };
  }
  assert.fail("expected MP_ERR_JOB_CALLBACK_REFUSED");
}

describe("signWebhook / verifyWebhook", () => {
  const body = '{"event":"job.finished","job":{"id":"j1"}}';
  const t = 1_700_000_000;

  it("signs Stripe-style: t=<ts>,v1=<hex HMAC-SHA256 of '<ts>.<body>'>", () => {
    const expected = createHmac("sha256", SECRET).update(`${t}.${body}`).digest("hex");
    assert.equal(signWebhook(SECRET, t, body), `t=${t},v1=${expected}`);
    assert.equal(signWebhook(SECRET, t, Buffer.from(body)), `t=${t},v1=${expected}`);
  });

  it("verifies the right secret and body within the tolerance", () => {
    const header = signWebhook(SECRET, t, body);
    assert.ok(verifyWebhook(SECRET, header, body, 300, t));
    assert.ok(verifyWebhook(SECRET, header, Buffer.from(body), 300, t + 299));
    assert.ok(verifyWebhook(SECRET, header, body, 300, t - 10), "small clock skew is fine");
  });

  it("fails for a tampered body, a wrong secret or an old timestamp", () => {
    const header = signWebhook(SECRET, t, body);
    assert.equal(verifyWebhook(SECRET, header, body.replace("j1", "j2"), 300, t), false);
    assert.equal(verifyWebhook(`${SECRET}x`, header, body, 300, t), false);
    assert.equal(verifyWebhook(SECRET, header, body, 300, t + 301), false);
    assert.equal(verifyWebhook(SECRET, header, body, 300, t - 301), false);
    // A fresh timestamp pasted onto an old signature does not verify either.
    assert.equal(verifyWebhook(SECRET, header.replace(`t=${t}`, `t=${t + 600}`), body, 300, t + 600), false);
  });

  it("fails for malformed headers and accepts any of several v1 entries", () => {
    const header = signWebhook(SECRET, t, body);
    const v1 = header.split(",v1=")[1]!;
    for (const bad of [
      undefined,
      null,
      "",
      "garbage",
      `t=${t}`,
      `v1=${v1}`,
      `t=abc,v1=${v1}`,
      `t=${t},v1=zz`,
    ])
      assert.equal(verifyWebhook(SECRET, bad, body, 300, t), false, String(bad));
    assert.equal(verifyWebhook(SECRET, `t=${t},v1=${v1.slice(0, 62)}`, body, 300, t), false);
    const rotated = `t=${t},v1=${"0".repeat(64)},v1=${v1}`;
    assert.ok(verifyWebhook(SECRET, rotated, body, 300, t));
  });

  it("uses the clock when no time is given", () => {
    const header = signWebhook(SECRET, Date.now() / 1000, body);
    assert.ok(verifyWebhook(SECRET, header, body));
    assert.equal(verifyWebhook(SECRET, signWebhook(SECRET, Date.now() / 1000 - 400, body), body), false);
  });
});

describe("deliverWebhook", () => {
  it("POSTs signed JSON with the documented headers; the receiver can verify it", async () => {
    receiver.reset(status(200));
    const opts = fast({ url: `${receiver.url}/hooks/modelport?x=1` });
    const state = await deliverWebhook(opts);
    assert.equal(receiver.received.length, 1);
    const r = receiver.received[0]!;
    assert.equal(r.method, "POST");
    assert.equal(r.path, "/hooks/modelport?x=1");
    assert.equal(r.headers["content-type"], "application/json");
    assert.equal(r.headers["user-agent"], `modelport/${VERSION}`);
    assert.equal(r.headers["x-modelport-event"], "job.finished");
    assert.match(String(r.headers["x-modelport-delivery"]), /^[0-9a-f-]{36}$/);
    assert.deepEqual(JSON.parse(r.body), {
      event: "job.finished",
      job: { id: "job-1", status: "succeeded" },
    });
    const sig = String(r.headers["x-modelport-signature"]);
    assert.match(sig, /^t=\d+,v1=[0-9a-f]{64}$/);
    assert.ok(verifyWebhook(SECRET, sig, r.body), "verifies with the secret");
    assert.equal(verifyWebhook("another-secret-0123456789", sig, r.body), false);
    assert.equal(verifyWebhook(SECRET, sig, r.body.replace("job-1", "job-2")), false);
    assert.equal(state.attempts, 1);
    assert.equal(state.lastStatus, 200);
    assert.equal(state.lastError, undefined);
    assert.equal(typeof state.deliveredAt, "number");
    assert.deepEqual(opts.attempts, [state]);
    assert.deepEqual(opts.sleeps, []);
  });

  it("sends a string body byte for byte, and no signature without a secret", async () => {
    receiver.reset(status(204));
    const body = '{"event":"job.finished",  "job":{"id":"ünïcode"}}';
    const state = await deliverWebhook(fast({ url: receiver.url, body, secret: "", event: "job.custom" }));
    const r = receiver.received[0]!;
    assert.equal(r.body, body);
    assert.equal(r.headers["x-modelport-signature"], undefined);
    assert.equal(r.headers["x-modelport-event"], "job.custom");
    assert.equal(state.lastStatus, 204);
    assert.ok(state.deliveredAt);
  });

  it("500, 500, then 200: delivered on attempt 3, one delivery id, each attempt signed", async () => {
    receiver.reset((res, n) => status(n < 3 ? 500 : 200)(res, n, undefined as never));
    const opts = fast({ url: receiver.url, deliveryId: "job-1:job.finished" });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 3);
    assert.equal(state.lastStatus, 200);
    assert.ok(state.deliveredAt);
    assert.deepEqual(
      opts.attempts.map((a) => [a.attempts, a.lastStatus, a.lastError, a.deliveredAt !== undefined]),
      [
        [1, 500, "HTTP 500", false],
        [2, 500, "HTTP 500", false],
        [3, 200, undefined, true],
      ],
    );
    assert.equal(receiver.received.length, 3);
    for (const r of receiver.received) {
      assert.equal(r.headers["x-modelport-delivery"], "job-1:job.finished");
      assert.ok(verifyWebhook(SECRET, String(r.headers["x-modelport-signature"]), r.body));
    }
    assert.equal(opts.sleeps.length, 2);
  });

  it("backs off exponentially with jitter, capped", async () => {
    receiver.reset(status(503));
    const opts = fast({
      url: receiver.url,
      maxAttempts: 6,
      backoffBaseMs: 100,
      backoffMaxMs: 500,
      random: () => 1,
    });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 6);
    assert.equal(state.deliveredAt, undefined);
    assert.equal(state.lastStatus, 503);
    assert.deepEqual(opts.sleeps, [100, 200, 400, 500, 500]);
    const low = fast({
      url: receiver.url,
      maxAttempts: 3,
      backoffBaseMs: 100,
      backoffMaxMs: 500,
      random: () => 0,
    });
    await deliverWebhook(low);
    assert.deepEqual(low.sleeps, [50, 100]);
  });

  it("honours Retry-After on 429 (seconds or a date), up to a cap", async () => {
    receiver.reset((res, n) =>
      status(n === 1 ? 429 : n === 2 ? 429 : 200, { "retry-after": n === 1 ? "2" : "3600" })(
        res,
        n,
        undefined as never,
      ),
    );
    const opts = fast({ url: receiver.url, retryAfterMaxMs: 10_000 });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 3);
    assert.ok(state.deliveredAt);
    assert.deepEqual(opts.sleeps, [2000, 10_000]);

    const nowMs = Date.parse("2030-01-01T00:00:00Z");
    receiver.reset((res, n) =>
      status(n === 1 ? 429 : 200, { "retry-after": "Tue, 01 Jan 2030 00:00:05 GMT" })(
        res,
        n,
        undefined as never,
      ),
    );
    const dated = fast({ url: receiver.url, now: () => nowMs, retryAfterMaxMs: 10_000 });
    await deliverWebhook(dated);
    assert.deepEqual(dated.sleeps, [5000]);
  });

  it("a receiver that hangs: the attempt times out and the next one is made", async () => {
    receiver.reset((res, n) => {
      if (n > 1) status(200)(res, n, undefined as never); // the first request is never answered
    });
    const opts = fast({ url: receiver.url, timeoutMs: 300 });
    const started = Date.now();
    const state = await deliverWebhook(opts);
    assert.ok(Date.now() - started >= 250, "waited for the timeout");
    assert.equal(state.attempts, 2);
    assert.ok(state.deliveredAt);
    assert.equal(opts.attempts[0]!.lastStatus, undefined);
    assert.match(opts.attempts[0]!.lastError ?? "", /timed out after 300 ms/);
  });

  it("retries network errors (nothing listening)", async () => {
    const dead = createServer();
    dead.listen(0, "127.0.0.1");
    await once(dead, "listening");
    const port = (dead.address() as AddressInfo).port;
    dead.close();
    await once(dead, "close");
    const opts = fast({ url: `http://127.0.0.1:${port}/`, maxAttempts: 2 });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 2);
    assert.match(state.lastError ?? "", /ECONNREFUSED/);
    assert.equal(opts.sleeps.length, 1);
  });

  it("400 stops at once; 408 is retried", async () => {
    receiver.reset(status(400));
    const opts = fast({ url: receiver.url });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 1);
    assert.equal(state.lastStatus, 400);
    assert.equal(state.lastError, "HTTP 400");
    assert.equal(receiver.received.length, 1);
    assert.deepEqual(opts.sleeps, []);

    receiver.reset((res, n) => status(n === 1 ? 408 : 200)(res, n, undefined as never));
    assert.equal((await deliverWebhook(fast({ url: receiver.url }))).attempts, 2);
  });

  it("does not follow redirects", async () => {
    receiver.reset(status(302, { location: "http://169.254.169.254/latest/meta-data" }));
    const state = await deliverWebhook(fast({ url: receiver.url }));
    assert.equal(state.attempts, 1);
    assert.equal(state.lastStatus, 302);
    assert.match(state.lastError ?? "", /redirects are not followed/);
    assert.equal(receiver.received.length, 1);
  });

  it("resumes from an earlier state: its attempts count toward maxAttempts", async () => {
    receiver.reset(status(500));
    const state = await deliverWebhook(
      fast({ url: receiver.url, maxAttempts: 4, state: { url: receiver.url, attempts: 3, lastStatus: 500 } }),
    );
    assert.equal(state.attempts, 4);
    assert.equal(receiver.received.length, 1);
  });

  it("an abort signal stops the retries", async () => {
    receiver.reset(status(500));
    const controller = new AbortController();
    const opts = fast({
      url: receiver.url,
      maxAttempts: 10,
      signal: controller.signal,
      onAttempt: (s) => {
        if (s.attempts === 2) controller.abort();
      },
    });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 2);
  });

  it("refuses a private URL at delivery without connecting, and does not retry", async () => {
    receiver.reset(status(200));
    const opts = fast({ url: receiver.url, allowPrivate: [] });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 1);
    assert.equal(state.deliveredAt, undefined);
    assert.match(state.lastError ?? "", /refused: .*127\.0\.0\.1.*loopback.*jobs\.webhooks\.allowPrivate/);
    assert.equal(receiver.received.length, 0);
  });

  it("connects to the address the check approved, with the URL's Host (DNS rebinding)", async () => {
    receiver.reset(status(200));
    const port = new URL(receiver.url).port;
    const lookups: string[] = [];
    // A name the system resolver does not know: only the checked address can be connected to.
    const lookup = async (host: string): Promise<LookupAddress[]> => {
      lookups.push(host);
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const state = await deliverWebhook(
      fast({ url: `http://hooks.modelport-test.invalid:${port}/cb`, lookup, allowPrivate: ["127.0.0.0/8"] }),
    );
    assert.ok(state.deliveredAt, state.lastError);
    assert.deepEqual(lookups, ["hooks.modelport-test.invalid"]);
    assert.equal(receiver.received[0]!.headers.host, `hooks.modelport-test.invalid:${port}`);
  });

  it("a name that passed at submission but now resolves to a private address is refused at delivery", async () => {
    receiver.reset(status(200));
    let answer = "93.184.215.14"; // public at submission
    const lookup = async (): Promise<LookupAddress[]> => [{ address: answer, family: 4 }];
    const url = "http://rebind.modelport-test.invalid/cb";
    await checkCallbackUrl(url, [], { lookup });
    answer = "169.254.169.254"; // rebinding to the metadata service
    const state = await deliverWebhook(fast({ url, lookup, allowPrivate: [] }));
    assert.equal(state.attempts, 1);
    assert.match(state.lastError ?? "", /169\.254\.169\.254.*link-local/);
    assert.equal(receiver.received.length, 0);
  });

  it("a name that does not resolve is retried (DNS may come back)", async () => {
    receiver.reset(status(200));
    const port = new URL(receiver.url).port;
    let calls = 0;
    const lookup = async (): Promise<LookupAddress[]> => {
      calls += 1;
      if (calls === 1) throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const opts = fast({ url: `http://flaky.modelport-test.invalid:${port}/`, lookup });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 2);
    assert.ok(state.deliveredAt);
    assert.match(opts.attempts[0]!.lastError ?? "", /could not be resolved/);
  });
});

describe("checkCallbackUrl", () => {
  const refusedByDefault = [
    "http://10.0.0.1/hook",
    "http://10.255.255.255/",
    "http://172.16.0.1/",
    "http://172.31.9.9/",
    "http://192.168.1.10:8080/",
    "http://100.64.0.1/",
    "http://127.0.0.1:9000/",
    "http://127.1.2.3/",
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.1.1/",
    "http://0.0.0.0/",
    "http://[::1]/",
    "http://[::]/",
    "http://[fe80::1]/",
    "http://[fd00::1]/",
    "http://[fc12::34]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[::ffff:a00:1]/",
    "https://192.168.0.1/",
    "http://2130706433/", // 127.0.0.1 as one number: URL normalises it
    "http://0x7f.1/",
  ];

  for (const url of refusedByDefault)
    it(`refuses ${url}`, async () => {
      const { message } = await refusal(checkCallbackUrl(url, []));
      assert.match(message, /jobs\.webhooks\.allowPrivate/);
    });

  it("says which address and how to allow it", async () => {
    const { message, details } = await refusal(
      checkCallbackUrl("http://169.254.169.254/latest/meta-data", []),
    );
    assert.match(message, /169\.254\.169\.254 is a link-local address/);
    assert.match(message, /add "169\.254\.169\.254".*jobs\.webhooks\.allowPrivate/);
    assert.equal(details?.["address"], "169.254.169.254");
  });

  it("refuses localhost (it resolves to loopback)", async () => {
    const { message } = await refusal(checkCallbackUrl("http://localhost:8080/hook", []));
    assert.match(message, /localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/);
    assert.match(message, /add "localhost"/);
  });

  it("refuses a name if ANY of its addresses is private", async () => {
    const lookup = async (): Promise<LookupAddress[]> => [
      { address: "93.184.215.14", family: 4 },
      { address: "10.1.2.3", family: 4 },
    ];
    const { message } = await refusal(checkCallbackUrl("https://mixed.example/", [], { lookup }));
    assert.match(message, /mixed\.example resolves to 10\.1\.2\.3/);
  });

  it("refuses schemes other than http and https, and URLs that are not URLs", async () => {
    for (const url of [
      "ftp://example.com/x",
      "file:///etc/passwd",
      "gopher://example.com/",
      "javascript:alert(1)",
      "ws://example.com/",
    ]) {
      const { message } = await refusal(checkCallbackUrl(url, []));
      assert.match(message, /must be http or https/, url);
    }
    await refusal(checkCallbackUrl("not a url", []));
    await refusal(checkCallbackUrl("http://", []));
  });

  it("refuses a host that does not resolve", async () => {
    const lookup = async (): Promise<LookupAddress[]> => {
      throw new Error("getaddrinfo ENOTFOUND nowhere.invalid");
    };
    const { details } = await refusal(checkCallbackUrl("http://nowhere.invalid/", [], { lookup }));
    assert.equal(details?.["reason"], "unresolvable");
  });

  it("accepts public addresses", async () => {
    const lookup = async (): Promise<LookupAddress[]> => [
      { address: "93.184.215.14", family: 4 },
      { address: "2606:2800:21f:cb07:6820:80da:af6b:8b2c", family: 6 },
    ];
    const checked = await checkCallbackUrl("https://hooks.example.com/modelport", [], { lookup });
    assert.equal(checked.hostname, "hooks.example.com");
    assert.equal(checked.addresses.length, 2);
    await checkCallbackUrl("http://8.8.8.8/", []);
    await checkCallbackUrl("http://[2001:4860:4860::8888]/", []);
    await checkCallbackUrl("http://[::ffff:8.8.8.8]/", []);
  });

  it("allowPrivate: hosts, IPs and CIDRs, IPv4 and IPv6", async () => {
    await checkCallbackUrl("http://127.0.0.1:9000/", ["127.0.0.1"]);
    await checkCallbackUrl("http://127.0.0.1:9000/", ["127.0.0.0/8"]);
    await checkCallbackUrl("http://[::ffff:127.0.0.1]/", ["127.0.0.1"]);
    await checkCallbackUrl("http://10.20.30.40/", ["10.20.0.0/16"]);
    await checkCallbackUrl("http://[::1]/", ["::1"]);
    await checkCallbackUrl("http://[::1]/", ["[::1]"]);
    await checkCallbackUrl("http://[fd00::abcd]/", ["fd00::/8"]);
    await checkCallbackUrl("http://localhost:8080/", ["localhost"]);
    await checkCallbackUrl("http://LOCALHOST:8080/", ["localhost"]);
    const lookup = async (): Promise<LookupAddress[]> => [{ address: "10.0.0.7", family: 4 }];
    await checkCallbackUrl("http://svc.internal/cb", ["svc.internal"], { lookup });
    await checkCallbackUrl("http://svc.internal/cb", ["10.0.0.0/24"], { lookup });
    // Allowing one range does not allow another.
    await refusal(checkCallbackUrl("http://10.0.1.7/", ["10.0.0.0/24"]));
    await refusal(checkCallbackUrl("http://169.254.169.254/", ["127.0.0.1"]));
    await refusal(checkCallbackUrl("http://other.internal/cb", ["svc.internal"], { lookup }));
  });

  it("allowPrivateProblems names malformed CIDRs (for start-up validation)", () => {
    assert.deepEqual(
      allowPrivateProblems(["127.0.0.1", "10.0.0.0/8", "fd00::/8", "svc.internal", "[::1]"]),
      [],
    );
    assert.equal(allowPrivateProblems(["10.0.0.0/33", "::1/129", "host/path", "10.0.0.0/x"]).length, 4);
  });

  it("a malformed CIDR in allowPrivate is a configuration error", async () => {
    await assert.rejects(
      checkCallbackUrl("http://8.8.8.8/", ["10.0.0.0/33"]),
      /MP_ERR_CONFIG_INVALID|allowPrivate/,
    );
  });
});

/** A Standard Webhooks secret: whsec_ and 24 random-looking bytes in base64. */
const WHSEC = `whsec_${Buffer.from("modelport-test-key-24byte").toString("base64")}`;

/** What a receiver with the standardwebhooks library does with one request; true when it verifies. */
function standardVerifies(secret: Webhook, r: Received, headers = r.headers): boolean {
  try {
    secret.verify(r.body, headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

describe("Standard Webhooks format", () => {
  it("webhook-id, webhook-timestamp and a webhook-signature the standardwebhooks library verifies (whsec_ secret)", async () => {
    receiver.reset(status(204));
    const state = await deliverWebhook(
      fast({ url: receiver.url, secret: WHSEC, deliveryId: "job-7:job.finished" }),
    );
    assert.ok(state.deliveredAt, state.lastError);
    const r = receiver.received[0]!;
    assert.equal(r.headers["webhook-id"], "job-7:job.finished");
    assert.match(String(r.headers["webhook-timestamp"]), /^\d{10}$/);
    assert.ok(Math.abs(Number(r.headers["webhook-timestamp"]) - Date.now() / 1000) < 600);
    assert.match(String(r.headers["webhook-signature"]), /^v1,[A-Za-z0-9+/]{43}=$/);
    const wh = new Webhook(WHSEC);
    assert.deepEqual(wh.verify(r.body, r.headers as Record<string, string>), JSON.parse(r.body));
    // The deprecated headers are still there for one release, and still verify.
    assert.equal(r.headers["x-modelport-delivery"], "job-7:job.finished");
    assert.ok(verifyWebhook(WHSEC, String(r.headers["x-modelport-signature"]), r.body));
  });

  it("the delivery id is signed: a replay under another webhook-id (or time, or body) does not verify", async () => {
    receiver.reset(status(200));
    await deliverWebhook(fast({ url: receiver.url, secret: WHSEC, deliveryId: "job-8:job.finished" }));
    const r = receiver.received[0]!;
    const wh = new Webhook(WHSEC);
    assert.ok(standardVerifies(wh, r));
    assert.equal(standardVerifies(wh, r, { ...r.headers, "webhook-id": "job-8:job.finished:replay" }), false);
    const ts = Number(r.headers["webhook-timestamp"]);
    assert.equal(standardVerifies(wh, r, { ...r.headers, "webhook-timestamp": String(ts + 1) }), false);
    assert.equal(standardVerifies(wh, { ...r, body: r.body.replace("succeeded", "failed") }), false);
    assert.equal(
      standardVerifies(
        new Webhook(`whsec_${Buffer.from("another-key-of-24-bytes!!").toString("base64")}`),
        r,
      ),
      false,
    );
    // The deprecated header signs no id: the same replay passes it. This is why it goes.
    assert.ok(verifyWebhook(WHSEC, String(r.headers["x-modelport-signature"]), r.body));
  });

  it("one webhook-id across the retries of one delivery, each attempt signed afresh", async () => {
    receiver.reset((res, n) => status(n < 3 ? 503 : 200)(res, n, undefined as never));
    const state = await deliverWebhook(fast({ url: receiver.url, secret: WHSEC }));
    assert.equal(state.attempts, 3);
    const ids = new Set(receiver.received.map((r) => r.headers["webhook-id"]));
    assert.equal(ids.size, 1);
    assert.match(String([...ids][0]), /^[0-9a-f-]{36}$/, "a random UUID when none is given");
    const wh = new Webhook(WHSEC);
    for (const r of receiver.received) assert.ok(standardVerifies(wh, r));
  });

  it("a plain secret is the raw key: it verifies with { format: 'raw' }, not as base64", async () => {
    receiver.reset(status(200));
    await deliverWebhook(fast({ url: receiver.url, secret: SECRET }));
    const r = receiver.received[0]!;
    assert.ok(standardVerifies(new Webhook(SECRET, { format: "raw" }), r));
    // Read as base64 it is another key (or, as here with "-", not base64 at all).
    assert.throws(() => new Webhook(SECRET), /Base64/);
    const base64ish = "plainsecretABCDEFGHIJ0123";
    await deliverWebhook(fast({ url: receiver.url, secret: base64ish }));
    const r2 = receiver.received[1]!;
    assert.ok(standardVerifies(new Webhook(base64ish, { format: "raw" }), r2));
    assert.equal(standardVerifies(new Webhook(base64ish), r2), false);
  });

  it("no secret: webhook-id and webhook-timestamp, no signature headers", async () => {
    receiver.reset(status(200));
    await deliverWebhook(fast({ url: receiver.url, secret: "", deliveryId: "d-1" }));
    const r = receiver.received[0]!;
    assert.equal(r.headers["webhook-id"], "d-1");
    assert.ok(r.headers["webhook-timestamp"]);
    assert.equal(r.headers["webhook-signature"], undefined);
    assert.equal(r.headers["x-modelport-signature"], undefined);
  });

  it("signStandardWebhook is HMAC-SHA256 over '<id>.<t>.<body>' with the decoded whsec_ key", () => {
    const key = Buffer.from("modelport-test-key-24byte");
    const expected = createHmac("sha256", key).update("id-1.1700000000.{}").digest("base64");
    assert.equal(signStandardWebhook(WHSEC, "id-1", 1_700_000_000.9, "{}"), `v1,${expected}`);
    assert.deepEqual(webhookKey(WHSEC), key);
    assert.deepEqual(webhookKey("plain-secret-0123456789"), Buffer.from("plain-secret-0123456789"));
  });

  it("a malformed or short whsec_ secret is a configuration error, before any attempt", async () => {
    for (const bad of ["whsec_not base64!!", "whsec_abc", `whsec_${Buffer.alloc(8).toString("base64")}`])
      assert.throws(() => webhookKey(bad), /MP_ERR_CONFIG_INVALID|whsec_/);
    receiver.reset(status(200));
    await assert.rejects(deliverWebhook(fast({ url: receiver.url, secret: "whsec_abc" })), /whsec_/);
    assert.equal(receiver.received.length, 0);
    assert.throws(() => resolveWebhookSecret(undefined, { MODELPORT_WEBHOOK_SECRET: "whsec_abc" }), /whsec_/);
  });

  it("the config refuses a malformed whsec_ secret and a malformed allowPrivate CIDR; dnsTimeoutMs defaults to 3 s", () => {
    const parse = (webhooks: object) => jobsSchema.safeParse({ webhooks });
    assert.equal(parse({ secret: WHSEC }).success, true);
    assert.equal(parse({ secret: "plain-secret-0123456789" }).success, true);
    assert.equal(parse({ secret: "whsec_not-base64-at-all!!" }).success, false);
    assert.equal(parse({ secret: `whsec_${Buffer.alloc(12).toString("base64")}` }).success, false);
    assert.equal(parse({ allowPrivate: ["10.0.0.0/33"] }).success, false);
    assert.equal(parse({ allowPrivate: ["10.0.0.0/8", "hooks.internal", "::1"] }).success, true);
    assert.equal(jobsSchema.parse({}).webhooks.dnsTimeoutMs, 3000);
  });

  it("resolveWebhookSecret: the configured one, else MODELPORT_WEBHOOK_SECRET, else none", () => {
    assert.equal(
      resolveWebhookSecret("from-config-0123456789", { MODELPORT_WEBHOOK_SECRET: WHSEC }),
      "from-config-0123456789",
    );
    assert.equal(resolveWebhookSecret(undefined, { MODELPORT_WEBHOOK_SECRET: WHSEC }), WHSEC);
    assert.equal(resolveWebhookSecret(undefined, { MODELPORT_WEBHOOK_SECRET: "" }), undefined);
    assert.equal(resolveWebhookSecret(undefined, {}), undefined);
  });
});

describe("MODELPORT_WEBHOOK_SECRET through a real server", () => {
  it("a job's webhook is signed with the environment's secret when the config has none", async () => {
    const models = await testModels();
    const dir = mkdtempSync(join(tmpdir(), "modelport-webhook-env-"));
    const file = join(dir, "modelport.yaml");
    writeFileSync(
      file,
      [
        "jobs:",
        `  sqlitePath: ${join(dir, "jobs.db")}`,
        `  blobs: {backend: fs, dir: ${join(dir, "blobs")}}`,
        '  webhooks: {allowPrivate: ["127.0.0.1"]}',
        "models:",
        `  - {name: tree, path: ${join(models, "churn-tree.onnx")}}`,
      ].join("\n"),
    );
    const previous = process.env["MODELPORT_WEBHOOK_SECRET"];
    process.env["MODELPORT_WEBHOOK_SECRET"] = WHSEC;
    let srv: Awaited<ReturnType<typeof startInProcess>> | undefined;
    try {
      srv = await startInProcess({ file });
      receiver.reset(status(200));
      const sub = await postJson(`${srv.url}/v1/models/tree/jobs`, {
        rows: [[3, 95, 4, 1, 0, 20]],
        callback_url: `${receiver.url}/hook`,
      });
      assert.equal(sub.status, 202, JSON.stringify(sub.body));
      const deadline = Date.now() + 30_000;
      while (receiver.received.length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      const r = receiver.received[0];
      assert.ok(r, "the webhook arrived");
      assert.equal(r.path, "/hook");
      assert.equal(r.headers["webhook-id"], `${sub.body.id}:job.finished`);
      const payload = new Webhook(WHSEC).verify(r.body, r.headers as Record<string, string>) as {
        job: { id: string; status: string };
      };
      assert.equal(payload.job.id, sub.body.id);
      assert.equal(payload.job.status, "succeeded");
    } finally {
      if (previous === undefined) delete process.env["MODELPORT_WEBHOOK_SECRET"];
      else process.env["MODELPORT_WEBHOOK_SECRET"] = previous;
      await srv?.close();
    }
  });
});

describe("the address check fails closed (only ipaddr.js 'unicast' passes)", () => {
  const refused: [string, RegExp][] = [
    ["http://[2002:7f00:1::1]/", /6to4/], // 6to4 carrying 127.0.0.1
    ["http://[2002:0808:0808::1]/", /6to4/], // 6to4 carrying a public address: still not plain unicast
    ["http://[64:ff9b::7f00:1]/", /NAT64/], // NAT64 well-known prefix, 127.0.0.1
    ["http://[64:ff9b:1::a00:1]/", /NAT64/], // NAT64 local-use prefix (64:ff9b:1::/48)
    ["http://[::ffff:0:7f00:1]/", /IPv4-translated/], // ::ffff:0:0:0/96
    ["http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", /Teredo/],
    ["http://[::7f00:1]/", /IPv4-compatible/], // ::/96, which ipaddr.js calls unicast
    ["http://[::ffff:127.0.0.1]/", /loopback/], // IPv4-mapped
    ["http://[::ffff:a9fe:a9fe]/", /link-local/], // IPv4-mapped metadata address, hex form
    ["http://127.0.0.1/", /loopback/],
    ["http://[::1]/", /loopback/],
    ["http://169.254.169.254/", /link-local/],
    ["http://[fe80::1]/", /link-local/],
    ["http://10.1.2.3/", /private/],
    ["http://172.20.0.1/", /private/],
    ["http://192.168.7.7/", /private/],
    ["http://[fd12::1]/", /unique-local/],
    ["http://224.0.0.251/", /multicast/],
    ["http://[ff02::1]/", /multicast/],
    ["http://255.255.255.255/", /broadcast/],
    ["http://192.0.2.10/", /reserved/], // documentation range
    ["http://[2001:db8::1]/", /reserved/],
    ["http://[fec0::1]/", /site-local/],
    ["http://[100::1]/", /discard/],
  ];
  for (const [url, kind] of refused)
    it(`refuses ${url}`, async () => {
      const { message, details } = await refusal(checkCallbackUrl(url, []));
      assert.match(message, kind);
      assert.equal(details?.["reason"], "private");
    });

  it("accepts public unicast, IPv4 and IPv6, also IPv4-mapped", async () => {
    for (const address of ["8.8.8.8", "93.184.215.14", "2606:4700:4700::1111", "::ffff:1.1.1.1"])
      assert.equal(privateKind(address), undefined, address);
    await checkCallbackUrl("http://1.1.1.1/", []);
    await checkCallbackUrl("https://[2606:4700:4700::1111]:8443/x", []);
  });

  it("refuses what cannot be parsed or carries a zone id", () => {
    assert.equal(privateKind("not-an-ip"), "unparseable");
    assert.match(privateKind("fe80::1%eth0") ?? "", /zone/);
  });

  it("the allow-list (net.BlockList) admits exactly its ranges, also through IPv4-mapped forms", async () => {
    await checkCallbackUrl("http://[::ffff:127.0.0.1]/", ["127.0.0.0/8"]);
    await checkCallbackUrl("http://127.0.0.1/", ["::ffff:127.0.0.0/104"]);
    await checkCallbackUrl("http://[2002:7f00:1::1]/", ["2002::/16"]);
    await refusal(checkCallbackUrl("http://[2002:7f00:1::1]/", ["127.0.0.0/8"]));
    await refusal(checkCallbackUrl("http://[::ffff:10.0.0.1]/", ["127.0.0.0/8"]));
    await refusal(checkCallbackUrl("http://[::2]/", ["::1"]));
  });
});

describe("DNS time limit", () => {
  const never: (host: string) => Promise<LookupAddress[]> = () => new Promise(() => {});

  it("a lookup that never answers is refused as unresolvable after lookupTimeoutMs", async () => {
    const { message, details } = await refusal(
      checkCallbackUrl("http://stuck.modelport-test.invalid/", [], { lookup: never, lookupTimeoutMs: 100 }),
    );
    assert.equal(details?.["reason"], "unresolvable");
    assert.match(message, /timed out after 100 ms/);
  });

  it("at delivery, a stuck lookup fails the attempt and the next attempt is made", async () => {
    receiver.reset(status(200));
    const port = new URL(receiver.url).port;
    let calls = 0;
    const lookup = (host: string): Promise<LookupAddress[]> => {
      calls += 1;
      return calls === 1 ? never(host) : Promise.resolve([{ address: "127.0.0.1", family: 4 }]);
    };
    const opts = fast({
      url: `http://slow-dns.modelport-test.invalid:${port}/`,
      lookup,
      lookupTimeoutMs: 100,
    });
    const state = await deliverWebhook(opts);
    assert.equal(state.attempts, 2);
    assert.ok(state.deliveredAt);
    assert.match(opts.attempts[0]!.lastError ?? "", /could not be resolved \(timed out after 100 ms\)/);
    assert.equal(opts.sleeps.length, 1, "backed off once, as for a network error");
  });
});
