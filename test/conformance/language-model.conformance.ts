// The contract every generative ServedModel keeps (src/llm/language-model.ts), as one suite each
// implementation runs (llama.cpp, upstream against an OpenAI-compatible server, the API tier's
// remote model): deltas that add up to the answer, usage, greedy determinism, stop sequences,
// abort that frees the slot at once, bounded admission refused with a retryable 503, and close.
// Timing-free: "at once" is checked by what happens next, not by a clock.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CancelHandle } from "../../src/cancel.js";
import type { ServedModel } from "../../src/catalogue/served-model.js";
import type { GenerateRequest } from "../../src/llm/language-model.js";

export interface LanguageModelFixture {
  /** Started and ready; nothing else uses it. */
  model: ServedModel;
  /** llm.maxWaiting the model was configured with (the wait line beyond its concurrency limit). */
  maxWaiting: number;
  /**
   * How requests beyond the limit are admitted: "queue" (llm.sequences generate, llm.maxWaiting
   * wait in line, status().concurrency reports both; llama.cpp), "concurrent" (sequences +
   * maxWaiting calls in flight at once, no line; upstream), "runner" (the API tier forwards and
   * the runner's own admission answers; its status reports no slots of its own).
   */
  admission: "queue" | "concurrent" | "runner";
  /** llm.sequences of the model (or of the runner's model). */
  sequences: number;
  /** admission "runner": the runner's own admission numbers now. */
  runnerLoad?: () => Promise<{ active: number; waiting: number }>;
  /** A greedy request whose answer has at least 6 pieces of text with maxTokens 12. */
  request: GenerateRequest;
  /** A request that generates for a long time (thousands of tokens), to hold a slot. */
  long: GenerateRequest;
  /** True when greedy answers repeat exactly (local backends). */
  deterministic: boolean;
  cleanup?: () => Promise<void>;
}

const codeOf = (err: unknown) => (err as { code?: string }).code;

/** Registers the conformance suite for the model `make` builds (once, before the tests). */
export function languageModelConformance(name: string, make: () => Promise<LanguageModelFixture>): void {
  describe(`LanguageModel conformance: ${name}`, () => {
    let f: LanguageModelFixture;
    let model: ServedModel;

    before(async () => {
      f = await make();
      model = f.model;
    });

    after(async () => {
      await model.close();
      await f.cleanup?.();
    });

    /** Starts a long generation and resolves once its first delta arrived (it holds a slot now). */
    async function hold(): Promise<{ abort(): void; done: Promise<unknown> }> {
      const ac = new CancelHandle();
      let first!: () => void;
      const started = new Promise<void>((r) => {
        first = r;
      });
      const done = model.generate!(f.long, { cancel: ac, onDelta: () => first() }).catch((e: unknown) => e);
      await Promise.race([started, done]);
      return { abort: () => ac.cancel(), done };
    }

    it("is ready, with no work in flight", () => {
      const s = model.status();
      assert.equal(s.ready, true, s.reason);
      assert.equal(s.state, "ready");
      assert.equal(s.name, model.name);
      assert.deepEqual(
        { active: s.concurrency!.active, waiting: s.concurrency!.waiting },
        { active: 0, waiting: 0 },
      );
      if (f.admission !== "runner") assert.equal(s.concurrency!.limit, f.sequences);
    });

    it("streams deltas that add up to the answer, and counts tokens", async () => {
      const deltas: string[] = [];
      const r = await model.generate!(f.request, { onDelta: (d) => deltas.push(d) });
      assert.ok(deltas.length >= 2, `deltas: ${JSON.stringify(deltas)}`);
      assert.ok(deltas.every((d) => d !== ""));
      assert.equal(deltas.join(""), r.text);
      assert.equal(r.finishReason, "length");
      assert.ok(r.usage.promptTokens > 0);
      assert.equal(r.usage.completionTokens, f.request.maxTokens);
    });

    it("repeats greedy answers exactly", async (t) => {
      if (!f.deterministic) return t.skip("the backend does not promise it");
      const a = await model.generate!(f.request);
      const b = await model.generate!(f.request);
      assert.equal(a.text, b.text);
    });

    it("ends at a stop sequence, which is in neither the text nor a delta", async () => {
      const full = (await model.generate!(f.request)).text;
      const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
      const deltas: string[] = [];
      const r = await model.generate!({ ...f.request, stop: [stop] }, { onDelta: (d) => deltas.push(d) });
      assert.equal(r.text, full.slice(0, full.indexOf(stop)));
      assert.equal(r.finishReason, "stop");
      assert.equal(deltas.join(""), r.text);
    });

    /**
     * Waits until no request holds or waits for a slot. Local models free them before the call
     * settles; a runner learns of an abort from the closed connection, a moment later.
     */
    async function idle(): Promise<void> {
      if (!f.runnerLoad) {
        assert.deepEqual(
          { active: model.status().concurrency!.active, waiting: model.status().concurrency!.waiting },
          { active: 0, waiting: 0 },
        );
        return;
      }
      for (;;) {
        const load = await f.runnerLoad();
        if (load.active === 0 && load.waiting === 0) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    }

    /** Requests generating at once before the next one waits or is refused. */
    const generating = () => (f.admission === "concurrent" ? f.sequences + f.maxWaiting : f.sequences);

    it("rejects an aborted request with MP_ERR_REQUEST_CANCELED and frees its slot for the next", async () => {
      const held = await Promise.all(Array.from({ length: generating() }, () => hold()));
      if (f.admission !== "runner") assert.equal(model.status().concurrency!.active, generating());
      // With a line the next request waits for a slot and gets the one the aborted request frees;
      // without one it is refused until then.
      const next = f.admission === "queue" ? model.generate!(f.request) : undefined;
      held[0]!.abort();
      assert.equal(codeOf(await held[0]!.done), "MP_ERR_REQUEST_CANCELED");
      assert.equal((await (next ?? model.generate!(f.request))).finishReason, "length");
      for (const h of held.slice(1)) h.abort();
      await Promise.all(held.map((h) => h.done));
      await idle();
      const already = new CancelHandle();
      already.cancel();
      await assert.rejects(
        model.generate!(f.request, { cancel: already }),
        (e) => codeOf(e) === "MP_ERR_REQUEST_CANCELED",
      );
    });

    it("admits up to its limit, then refuses with a retryable MP_ERR_MODEL_OVERLOADED", async () => {
      const held = await Promise.all(Array.from({ length: generating() }, () => hold()));
      const line = f.admission === "concurrent" ? 0 : f.maxWaiting;
      const waiting = Array.from({ length: line }, () => {
        const ac = new CancelHandle();
        return { ac, done: model.generate!(f.request, { cancel: ac }).catch((e: unknown) => e) };
      });
      if (f.admission === "queue") assert.equal(model.status().concurrency!.waiting, f.maxWaiting);
      // The API tier learns the runner is full from the runner's answer: wait for the line there.
      if (f.runnerLoad)
        while ((await f.runnerLoad()).waiting < line) await new Promise((r) => setTimeout(r, 10));
      await assert.rejects(model.generate!(f.request), (e: unknown) => {
        assert.equal(codeOf(e), "MP_ERR_MODEL_OVERLOADED", String(e));
        assert.equal((e as { retryable: boolean }).retryable, true);
        assert.ok(((e as { details?: { retryAfterSeconds?: number } }).details?.retryAfterSeconds ?? 0) >= 1);
        return true;
      });
      for (const w of waiting) w.ac.cancel();
      for (const w of waiting) assert.equal(codeOf(await w.done), "MP_ERR_REQUEST_CANCELED");
      if (f.admission === "queue") assert.equal(model.status().concurrency!.waiting, 0);
      for (const h of held) h.abort();
      await Promise.all(held.map((h) => h.done));
      await idle();
    });

    it("closes idempotently, ending work in flight, and refuses requests after", async () => {
      const h = await hold();
      await Promise.all([model.close(), model.close()]);
      const ended = await h.done;
      assert.ok(
        ["MP_ERR_SERVER_SHUTTING_DOWN", "MP_ERR_REQUEST_CANCELED"].includes(codeOf(ended) ?? ""),
        String(ended),
      );
      assert.equal(model.status().ready, false);
      await assert.rejects(model.generate!(f.request), (e) =>
        ["MP_ERR_SERVER_SHUTTING_DOWN", "MP_ERR_MODEL_NOT_READY"].includes(codeOf(e) ?? ""),
      );
    });
  });
}
