// The contract every ServedModel with the embeddings capability keeps (ServedModel.embed), as one
// suite each implementation runs: transformers.js in a runner, an upstream OpenAI-compatible
// server, and the API tier's remote model. One vector per input in input order, equal texts
// equal vectors, a canceled call refused with its code, and close.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CancelHandle } from "../../src/cancel.js";
import type { ServedModel } from "../../src/catalogue/served-model.js";
import { isModelportError } from "../../src/errors.js";

export interface EmbeddingsFixture {
  /** Started and ready; nothing else uses it. */
  model: ServedModel;
  cleanup?: () => Promise<void>;
}

const codeOf = (err: unknown) => (isModelportError(err) ? err.code : `not a ModelportError: ${String(err)}`);
const list = (v: Float32Array | readonly number[]) => Array.from(v);
const close = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) <= 1e-4 * Math.max(1, Math.abs(x)));

export function embeddingsConformance(name: string, make: () => Promise<EmbeddingsFixture>): void {
  describe(`Embeddings conformance: ${name}`, () => {
    let f: EmbeddingsFixture;
    let model: ServedModel;

    before(async () => {
      f = await make();
      model = f.model;
    });

    after(async () => {
      await model.close();
      await f.cleanup?.();
    });

    it("is a ready language model with the embeddings capability", () => {
      assert.equal(model.kind, "language");
      assert.equal(model.capabilities.embeddings, true);
      assert.equal(model.capabilities.predict, false);
      const s = model.status();
      assert.equal(s.ready, true, s.reason);
      assert.equal(s.name, model.name);
    });

    it("answers one vector per input, in input order, equal texts with equal vectors", async () => {
      const texts = ["a short text", "something else entirely", "a short text"];
      const r = await model.embed!(texts);
      assert.equal(r.vectors.length, 3);
      const [a, b, c] = r.vectors.map(list);
      assert.ok(a!.length > 0 && a!.length === b!.length, "one dimension for every vector");
      assert.ok(a!.every(Number.isFinite));
      assert.ok(close(a!, c!), "equal texts, equal vectors");
      assert.ok(!close(a!, b!), "different texts, different vectors");
      assert.ok(r.promptTokens > 0);
      const swapped = await model.embed!([texts[1]!, texts[0]!]);
      assert.ok(
        close(list(swapped.vectors[0]!), b!) && close(list(swapped.vectors[1]!), a!),
        "input order kept",
      );
    });

    it("refuses a canceled call with MP_ERR_REQUEST_CANCELED", async () => {
      const cancel = new CancelHandle();
      cancel.cancel();
      await assert.rejects(model.embed!(["x"], { cancel }), (e) => codeOf(e) === "MP_ERR_REQUEST_CANCELED");
    });

    it("closes idempotently and refuses calls after", async () => {
      await Promise.all([model.close(), model.close()]);
      assert.equal(model.status().ready, false);
      await assert.rejects(model.embed!(["x"]), (e) =>
        ["MP_ERR_SERVER_SHUTTING_DOWN", "MP_ERR_MODEL_NOT_READY"].includes(codeOf(e)),
      );
    });
  });
}
