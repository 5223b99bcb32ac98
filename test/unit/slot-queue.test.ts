// Admission for language models: first come first served, a bounded line, and a waiter that
// leaves (client gone, deadline, shutdown) leaves at once.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CancelHandle } from "../../src/cancel.js";
import { SlotQueue } from "../../src/llm/slot-queue.js";

const code = (c: string) => (err: unknown) => (err as { code?: string }).code === c;

describe("SlotQueue", () => {
  it("hands out free slots, then queues in order, then refuses with a retryable 503", async () => {
    const q = new SlotQueue(["s1"], { name: "m", maxWaiting: 2 });
    const first = await q.acquire();
    const order: string[] = [];
    const a = q.acquire().then((s) => order.push(`a:${s}`));
    const b = q.acquire().then((s) => order.push(`b:${s}`));
    assert.equal(q.waiting, 2);
    await assert.rejects(q.acquire(), (err: unknown) => {
      assert.ok(code("MP_ERR_MODEL_OVERLOADED")(err));
      assert.ok(((err as { details: { retryAfterSeconds: number } }).details.retryAfterSeconds ?? 0) >= 1);
      return true;
    });
    q.release(first);
    await a;
    q.release("s1");
    await b;
    assert.deepEqual(order, ["a:s1", "b:s1"]);
    assert.equal(q.active, 1);
  });

  it("drops a waiter whose client cancels, and refuses an already canceled one", async () => {
    const q = new SlotQueue([1], { name: "m", maxWaiting: 5 });
    await q.acquire();
    const cancel = new CancelHandle();
    const waiting = q.acquire(cancel);
    cancel.cancel();
    await assert.rejects(waiting, code("MP_ERR_REQUEST_CANCELED"));
    assert.equal(q.waiting, 0);
    await assert.rejects(q.acquire(cancel), code("MP_ERR_REQUEST_CANCELED"));
  });

  it("gives up on a wait longer than maxWaitMs with 504, and refuses everyone once closed", async () => {
    const q = new SlotQueue([1], { name: "m", maxWaiting: 5, maxWaitMs: 1 });
    await q.acquire();
    await assert.rejects(q.acquire(), code("MP_ERR_DEADLINE_EXCEEDED"));
    const q2 = new SlotQueue([1], { name: "m", maxWaiting: 5 });
    await q2.acquire();
    const waiting = q2.acquire();
    q2.close();
    await assert.rejects(waiting, code("MP_ERR_SERVER_SHUTTING_DOWN"));
    await assert.rejects(q2.acquire(), code("MP_ERR_SERVER_SHUTTING_DOWN"));
  });
});
