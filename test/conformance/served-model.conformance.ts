// The contract every tensor ServedModel keeps (src/catalogue/served-model.ts), as one suite each
// implementation runs: a local model in a worker thread or a child process, and the API tier's
// remote model forwarding to a real runner process. Capabilities and kind, the one status
// shape, the golden example's numbers through predict, a canceled or expired call refused with
// its code, the not-ready error, and close (idempotent; calls refused afterwards).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, describe, it } from "node:test";
import { CancelHandle } from "../../src/cancel.js";
import type { ServedModel } from "../../src/catalogue/served-model.js";
import { isModelportError } from "../../src/errors.js";
import type { GoldenFile } from "../../src/golden.js";
import type { TensorMap } from "../../src/tensor.js";

export interface ServedModelFixture {
  /** Started, ready, with capability predict; nothing else uses it. */
  model: ServedModel;
  /** Its golden file (the example scored through predict). */
  golden: string;
  /** Where the model runs, as status().runner.placement says. */
  placement: "worker" | "process" | "remote";
  cleanup?: () => Promise<void>;
}

const codeOf = (err: unknown) => (isModelportError(err) ? err.code : `not a ModelportError: ${String(err)}`);

/** The golden inputs as tensors (FP32 unless the file says otherwise). */
function inputsOf(golden: GoldenFile): TensorMap {
  const out: TensorMap = {};
  for (const [name, t] of Object.entries(golden.inputs)) {
    const data = t.data as number[];
    const datatype = (t.datatype ?? "FP32") as "FP32";
    out[name] = { datatype, shape: t.shape, data: Float32Array.from(data) };
  }
  return out;
}

/** Registers the conformance suite for the model `make` builds (once, before the tests). */
export function servedModelConformance(name: string, make: () => Promise<ServedModelFixture>): void {
  describe(`ServedModel conformance: ${name}`, () => {
    let f: ServedModelFixture;
    let golden: GoldenFile;

    before(async () => {
      f = await make();
      golden = JSON.parse(await readFile(f.golden, "utf8")) as GoldenFile;
    });

    after(async () => {
      await f?.model.close();
      await f?.cleanup?.();
    });

    it("is a ready tensor model with capability predict and nothing else", () => {
      const m = f.model;
      assert.equal(m.kind, "tensor");
      assert.equal(m.ready, true);
      assert.deepEqual(
        { ...m.capabilities },
        { predict: true, chat: false, completion: false, embeddings: false, stream: false },
      );
      assert.equal(typeof m.predict, "function");
      assert.equal(m.generate, undefined);
      assert.equal(m.embed, undefined);
      assert.ok(m.signature && m.signature.inputs.length > 0, "the signature is known once ready");
    });

    it("reports the one status shape", () => {
      const s = f.model.status();
      assert.equal(s.name, f.model.name);
      assert.equal(s.version, f.model.version);
      assert.equal(s.backend, f.model.backend);
      assert.equal(s.state, "ready");
      assert.equal(s.ready, true);
      assert.equal(s.reason, undefined);
      assert.equal(s.code, undefined);
      assert.ok(["passed", "runner"].includes(s.golden), s.golden);
      assert.equal(s.runner?.placement, f.placement);
      assert.equal(typeof s.restarts, "number");
      assert.equal(typeof s.recycles, "number");
      assert.ok(s.batching, "batching settings and depth");
    });

    it("scores the golden example through predict", async () => {
      const out = await f.model.predict!(inputsOf(golden), { deadline: performance.now() + 30_000 });
      for (const [name, expected] of Object.entries(golden.outputs)) {
        const got = out[name];
        assert.ok(got, `output ${name}`);
        assert.deepEqual(got.shape, expected.shape, name);
        const data = Array.from(got.data as ArrayLike<number | bigint>, Number);
        for (const [i, e] of (expected.data as number[]).entries())
          assert.ok(
            Math.abs(data[i]! - e) <= 1e-4 * Math.max(1, Math.abs(e)),
            `${name}[${i}]: ${data[i]} vs ${e}`,
          );
      }
    });

    it("refuses a call already canceled with MP_ERR_REQUEST_CANCELED", async () => {
      const cancel = new CancelHandle();
      cancel.cancel();
      await assert.rejects(f.model.predict!(inputsOf(golden), { cancel }), (err) => {
        assert.equal(codeOf(err), "MP_ERR_REQUEST_CANCELED");
        return true;
      });
    });

    it("refuses a call whose deadline has passed with MP_ERR_DEADLINE_EXCEEDED", async () => {
      await assert.rejects(f.model.predict!(inputsOf(golden), { deadline: performance.now() - 1 }), (err) => {
        assert.equal(codeOf(err), "MP_ERR_DEADLINE_EXCEEDED");
        return true;
      });
    });

    it("closes idempotently; calls afterwards are refused with a 503 code", async () => {
      await f.model.close();
      await f.model.close();
      assert.equal(f.model.ready, false);
      await assert.rejects(
        f.model.predict!(inputsOf(golden), { deadline: performance.now() + 5000 }),
        (err) => {
          assert.ok(
            ["MP_ERR_SERVER_SHUTTING_DOWN", "MP_ERR_MODEL_NOT_READY", "MP_ERR_RUNNER_UNAVAILABLE"].includes(
              codeOf(err),
            ),
            codeOf(err),
          );
          return true;
        },
      );
      const e = f.model.notReadyError();
      assert.ok(isModelportError(e), "notReadyError is a ModelportError");
      assert.equal(e.status, 503);
    });
  });
}
