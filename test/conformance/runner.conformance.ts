// The contract every Runner keeps (src/runner/runner.ts), as one suite each placement runs: a
// worker thread and a supervised child process. The model is the control handler
// (test/fixtures/handlers.ts), whose failures and crashes the test triggers by its input, so
// nothing here depends on timing: load information, answers, concurrent calls, a failing call
// that leaves the runner usable, a crash (reported once, in-flight call rejected, a fresh start
// works), terminate, a load that fails, and close.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isModelportError } from "../../src/errors.js";
import type { Runner, RunnerSpec } from "../../src/runner/runner.js";
import type { TensorMap } from "../../src/tensor.js";
import { writeControlHandler, writeEchoHandler } from "../fixtures/handlers.js";

/** Makes a runner for `spec`, not started. */
export type RunnerMaker = (spec: RunnerSpec) => Runner;

const codeOf = (err: unknown) => (isModelportError(err) ? err.code : `not a ModelportError: ${String(err)}`);

const rows = (...xs: number[]): TensorMap => ({
  x: { datatype: "FP32", shape: [xs.length, 1], data: Float32Array.from(xs) },
});

const ys = (out: TensorMap) => Array.from(out.y!.data as Float32Array);

/** Registers the conformance suite for the runners `make` builds. */
export function runnerConformance(name: string, make: RunnerMaker): void {
  describe(`Runner conformance: ${name}`, () => {
    let dir: string;
    let spec: RunnerSpec;
    let runner: Runner;
    const crashes: string[] = [];

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "modelport-runner-"));
      spec = {
        name: "control",
        backend: "custom",
        path: writeControlHandler(dir),
        threads: 1,
        device: "cpu",
        options: { dir, log: join(dir, "calls.log") },
      };
      runner = make(spec);
      runner.onCrash((reason) => crashes.push(reason));
    });

    after(async () => {
      await runner.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("starts with the model's signature, load time and memory", async () => {
      const info = await runner.start();
      assert.deepEqual(
        info.signature.inputs.map((s) => [s.name, s.datatype, s.shape]),
        [["x", "FP32", [-1, 1]]],
      );
      assert.deepEqual(
        info.signature.outputs.map((s) => [s.name, s.datatype, s.shape]),
        [["y", "FP32", [-1, 1]]],
      );
      assert.ok(Number.isFinite(info.loadMs) && info.loadMs >= 0, String(info.loadMs));
      assert.ok(Number.isFinite(info.memoryBytes) && info.memoryBytes >= 0, String(info.memoryBytes));
    });

    it("answers a batch with the model's outputs, shape and datatype", async () => {
      const out = await runner.predict(rows(1, 2, 3));
      assert.equal(out.y!.datatype, "FP32");
      assert.deepEqual(out.y!.shape, [3, 1]);
      assert.deepEqual(ys(out), [2, 4, 6]);
    });

    /** Runs `body` with a started runner of the echo handler and the crashes it reports; closes it after. */
    async function withEcho(body: (echo: Runner, crashes: string[]) => Promise<void>): Promise<void> {
      const echo = make({ ...spec, name: "echo", path: writeEchoHandler(dir) });
      const echoCrashes: string[] = [];
      echo.onCrash((reason) => echoCrashes.push(reason));
      try {
        await echo.start();
        await body(echo, echoCrashes);
      } finally {
        await echo.close();
      }
    }

    it("passes tensors of every kind to the model and back intact, large ones included", () =>
      withEcho(async (echo) => {
        const n = 1_000_000;
        // A 4 MB input as a view into a larger buffer, as a request body's tensors are.
        const body = new ArrayBuffer(16 + n * 4);
        const big = new Float32Array(body, 16, n);
        for (let i = 0; i < n; i++) big[i] = Math.sin(i) * 1e3;
        const sent: TensorMap = {
          big: { datatype: "FP32", shape: [1, n], data: big },
          f64: { datatype: "FP64", shape: [3], data: Float64Array.of(Math.PI, -0, 1e300) },
          i64: { datatype: "INT64", shape: [2], data: BigInt64Array.of(-(2n ** 63n), 2n ** 62n + 1n) },
          u64: { datatype: "UINT64", shape: [1], data: BigUint64Array.of(2n ** 64n - 1n) },
          u8: { datatype: "BOOL", shape: [2, 2], data: Uint8Array.of(1, 0, 0, 1) },
          i32: { datatype: "INT32", shape: [], data: Int32Array.of(-7) },
          text: { datatype: "BYTES", shape: [2], data: ["naïve ✓", ""] },
          empty: { datatype: "FP32", shape: [0, 4], data: new Float32Array(0) },
        };
        // What is expected, copied before the call (a runner may move the buffers it is given).
        const expected = Object.fromEntries(
          Object.entries(sent).map(([name, t]) => [
            name,
            {
              ...t,
              shape: [...t.shape],
              kind: t.data.constructor.name,
              values: Array.from(t.data as ArrayLike<unknown>),
            },
          ]),
        );
        const [out, small] = await Promise.all([echo.predict(sent), echo.predict(rows(3))]);
        assert.deepEqual(
          out.kinds!.data,
          Object.entries(expected).map(([name, e]) => `${name}:${e.kind}`),
          "the model gets each kind of array as sent",
        );
        for (const [name, e] of Object.entries(expected)) {
          const got = out[name]!;
          assert.equal(got.datatype, e.datatype, name);
          assert.deepEqual(got.shape, e.shape, name);
          assert.equal(got.data.constructor.name, e.kind, name);
          assert.deepEqual(Array.from(got.data as ArrayLike<unknown>), e.values, name);
        }
        assert.deepEqual(
          Array.from(small.x!.data as Float32Array),
          [3],
          "a call beside it gets its own answer",
        );
      }));

    it("fails a call whose answer cannot be sent back with MP_ERR_HANDLER_FAILED, not the runner", () =>
      withEcho(async (echo, echoCrashes) => {
        const unsendable = {
          unsendable: { datatype: "FP32", shape: [1], data: Float32Array.of(1) },
        } as TensorMap;
        await assert.rejects(echo.predict(unsendable), (e) => {
          assert.equal(codeOf(e), "MP_ERR_HANDLER_FAILED");
          assert.match((e as Error).message, /could not be sent back/);
          return true;
        });
        assert.deepEqual(Array.from((await echo.predict(rows(2))).x!.data as Float32Array), [2]);
        assert.deepEqual(echoCrashes, []);
      }));

    it("dies while a large answer is on its way: the call is answered whole or fails as a crash, and a fresh start serves large calls", () =>
      withEcho(async (echo, echoCrashes) => {
        const n = 1_000_000;
        const big = () => Float32Array.from({ length: n }, (_, i) => i - n / 2);
        const expected = Array.from(big());
        const outcome = await echo
          .predict({ exitAfterAnswer: { datatype: "FP32", shape: [n], data: big() } })
          .catch((e: unknown) => e);
        if (outcome instanceof Error) assert.equal(codeOf(outcome), "MP_ERR_RUNNER_CRASHED");
        else
          assert.deepEqual(
            Array.from((outcome as TensorMap).exitAfterAnswer!.data as Float32Array),
            expected,
          );
        for (let i = 0; i < 1000 && echoCrashes.length === 0; i++)
          await new Promise((r) => setTimeout(r, 10));
        assert.equal(echoCrashes.length, 1, "the runner's end is reported once");
        await echo.start();
        const again = await echo.predict({ x: { datatype: "FP32", shape: [n], data: big() } });
        assert.deepEqual(Array.from(again.x!.data as Float32Array), expected);
      }));

    it("answers concurrent calls each with its own result", async () => {
      const xs = [10, 11, 12, 13, 14, 15];
      const outs = await Promise.all(xs.map((x) => runner.predict(rows(x))));
      assert.deepEqual(
        outs.map(ys),
        xs.map((x) => [2 * x]),
      );
    });

    it("rejects a call the model fails with a ModelportError and stays usable", async () => {
      writeFileSync(join(dir, "fail"), "");
      try {
        await assert.rejects(runner.predict(rows(666)), (e) => {
          assert.equal(codeOf(e), "MP_ERR_HANDLER_FAILED");
          return true;
        });
      } finally {
        rmSync(join(dir, "fail"));
      }
      assert.deepEqual(ys(await runner.predict(rows(4))), [8]);
      assert.deepEqual(crashes, [], "a failed call is not a crash");
    });

    it("reports a crash once, rejects the call in flight with MP_ERR_RUNNER_CRASHED, and starts afresh", async () => {
      await assert.rejects(runner.predict(rows(777)), (e) => {
        assert.equal(codeOf(e), "MP_ERR_RUNNER_CRASHED");
        assert.equal((e as { retryable: boolean }).retryable, true);
        return true;
      });
      // onCrash may come a tick after the rejection; wait for it without a clock guess.
      for (let i = 0; i < 500 && crashes.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(crashes.length, 1, `crash reports: ${JSON.stringify(crashes)}`);
      await assert.rejects(runner.predict(rows(1)), (e) => codeOf(e) === "MP_ERR_RUNNER_CRASHED");
      await runner.start();
      assert.deepEqual(ys(await runner.predict(rows(5))), [10]);
    });

    it("terminates at once: the call in progress fails naming the reason, no crash report, and a fresh start works", async (t) => {
      if (!runner.terminate) return t.skip("this runner has no terminate()");
      const stuck = runner.predict(rows(-1)).catch((e: unknown) => e);
      // The call has reached the handler once the log shows it.
      const log = join(dir, "calls.log");
      for (let i = 0; i < 6000 && !(existsSync(log) && readFileSync(log, "utf8").includes("-1\n")); i++)
        await new Promise((r) => setTimeout(r, 10));
      const before = crashes.length;
      await runner.terminate("stuck past the hard limit");
      const err = await stuck;
      assert.equal(codeOf(err), "MP_ERR_RUNNER_CRASHED");
      assert.match((err as Error).message, /stuck past the hard limit/);
      assert.equal(crashes.length, before, "terminate() never fires onCrash");
      await runner.start();
      assert.deepEqual(ys(await runner.predict(rows(6))), [12]);
    });

    it("closes idempotently, failing the call in flight, without a crash report; calls after are refused", async () => {
      const before = crashes.length;
      const inFlight = runner.predict(rows(-2)).catch((e: unknown) => e);
      await Promise.all([runner.close(), runner.close()]);
      assert.ok(isModelportError(await inFlight), "the call in flight ends with a ModelportError");
      await assert.rejects(runner.predict(rows(1)), (e) => isModelportError(e));
      assert.equal(crashes.length, before);
    });

    it("rejects a load that cannot succeed with MP_ERR_MODEL_LOAD_FAILED", async () => {
      const broken = make({ ...spec, name: "missing", path: join(dir, "no-such-handler.mjs") });
      try {
        await assert.rejects(broken.start(), (e) => codeOf(e) === "MP_ERR_MODEL_LOAD_FAILED");
      } finally {
        await broken.close();
      }
    });
  });
}
