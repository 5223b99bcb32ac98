// A worker-thread runner that dies (an uncaught exception in the handler's thread, or
// process.exit there), as docs/Runners.md "When a runner crashes" describes: the request in
// flight gets 503 MP_ERR_RUNNER_CRASHED, the model is `restarting` with the reason, the server
// stays up, the runner restarts after 0.5 s and is ready again once its golden check passes;
// crashes in a row back off (0.5 s, 1 s, 2 s, ...) and the streak resets after a good restart.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { writeControlGolden, writeControlHandler } from "../fixtures/handlers.js";
import { type InProcessServer, postJson, startInProcess } from "../helpers/server.js";

let srv: InProcessServer;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "modelport-worker-crash-"));
  const handler = writeControlHandler(dir);
  const golden = writeControlGolden(dir);
  const file = join(dir, "modelport.yaml");
  writeFileSync(
    file,
    [
      "models:",
      `  - {name: ctl, backend: custom, path: ${handler}, golden: ${golden}, options: {dir: ${dir}, log: ${join(dir, "calls.log")}}}`,
    ].join("\n"),
  );
  srv = await startInProcess({ file });
});

after(async () => {
  rmSync(join(dir, "crash-always"), { force: true });
  await srv.close();
});

const status = async () =>
  ((await (await fetch(`${srv.url}/v1/models/ctl`)).json()) as any).status as {
    state: string;
    ready: boolean;
    reason?: string;
    restarts: number;
  };

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** The restart delays logged so far, in order. */
const restartDelays = () =>
  srv.logs.filter((l) => /runner stopped .*restarting$/.test(String(l.msg))).map((l) => l.delayMs as number);

const predict = (x: number) => postJson(`${srv.url}/v1/models/ctl/predict`, { rows: [[x]] });

describe("worker-thread runner crash", () => {
  for (const [x, how, reason] of [
    [777, "an uncaught exception in the worker thread", /crashed its worker on purpose/],
    [778, "process.exit in the worker thread", /worker exited with code 3/],
  ] as const) {
    it(`${how}: 503 MP_ERR_RUNNER_CRASHED, restarting in 500 ms, then ready with right answers`, async () => {
      const before = await status();
      assert.equal(before.state, "ready");
      const delaysBefore = restartDelays().length;

      const res = await predict(x);
      assert.equal(res.status, 503, JSON.stringify(res.body));
      assert.equal(res.body.error.code, "MP_ERR_RUNNER_CRASHED");
      assert.equal(res.body.error.retryable, true);
      assert.match(res.body.error.message, reason);

      // Restarting (or already loading again) with the reason; the server itself is up.
      const s = await status();
      if (s.state === "restarting") assert.match(s.reason ?? "", /restarting in 500 ms/);
      else assert.ok(["loading", "ready"].includes(s.state), JSON.stringify(s));
      assert.equal((await fetch(`${srv.url}/livez`)).status, 200);
      assert.deepEqual(
        restartDelays().slice(delaysBefore),
        [500],
        "the first crash after a good run waits 500 ms",
      );

      const ready = await until("the model to be ready again", async () => {
        const st = await status();
        return st.ready ? st : undefined;
      });
      assert.equal(ready.restarts, before.restarts + 1);
      const ok = await predict(4);
      assert.equal(ok.status, 200);
      assert.deepEqual(ok.body.outputs.y, [[8]]);
    });
  }

  it("crashes in a row back off 0.5 s, 1 s, 2 s; after a restart passes its golden check the next crash waits 0.5 s again", async () => {
    const start = restartDelays().length;
    const restartsBefore = (await status()).restarts;
    // Every call crashes, the golden check of each restart included.
    writeFileSync(join(dir, "crash-always"), "");
    const res = await predict(5);
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, "MP_ERR_RUNNER_CRASHED");
    await until("three crashes in a row", async () =>
      restartDelays().length - start >= 3 ? true : undefined,
    );
    rmSync(join(dir, "crash-always"));
    assert.deepEqual(restartDelays().slice(start, start + 3), [500, 1000, 2000]);
    const notReady = await (await fetch(`${srv.url}/readyz`)).json();
    assert.match(JSON.stringify(notReady), /restarting in|stopped/, JSON.stringify(notReady));

    const ready = await until("the model to recover", async () => {
      const st = await status();
      return st.ready ? st : undefined;
    });
    assert.ok(ready.restarts >= restartsBefore + 3, JSON.stringify(ready));
    assert.deepEqual((await predict(6)).body.outputs.y, [[12]]);

    const afterGood = restartDelays().length;
    assert.equal((await predict(777)).status, 503);
    assert.deepEqual(restartDelays().slice(afterGood), [500], "the streak reset");
    await until("ready after the last crash", async () => ((await status()).ready ? true : undefined));
  });
});
