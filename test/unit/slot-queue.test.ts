// Admission for language models: first come first served, a bounded line, and a waiter that
// leaves (client gone, deadline, shutdown) leaves at once; background work (jobs) behind every
// interactive request.
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
  it("gives a freed slot to a waiting interactive request before background work that waited longer", async () => {
    const q = new SlotQueue(["s1"], { name: "m", maxWaiting: 1 });
    const held = await q.acquire();
    const order: string[] = [];
    const job1 = q.acquire(undefined, undefined, true).then((s) => {
      order.push("job1");
      return s;
    });
    const job2 = q.acquire(undefined, undefined, true).then((s) => {
      order.push("job2");
      return s;
    });
    const user = q.acquire().then((s) => {
      order.push("user");
      return s;
    });
    assert.equal(q.waiting, 3);
    // Background waiters take no place in the line: a second interactive one is still refused.
    await assert.rejects(q.acquire(), code("MP_ERR_MODEL_OVERLOADED"));
    q.release(held);
    q.release(await user);
    q.release(await job1);
    await job2;
    assert.deepEqual(order, ["user", "job1", "job2"]);
    assert.equal(q.waiting, 0);
  });

  it("lets a canceled background waiter leave, and does not bound its wait by maxWaitMs", async () => {
    const q = new SlotQueue([1], { name: "m", maxWaiting: 0, maxWaitMs: 1 });
    const held = await q.acquire();
    const cancel = new CancelHandle();
    const gone = q.acquire(cancel, undefined, true);
    const stays = q.acquire(undefined, undefined, true);
    // Past maxWaitMs an interactive waiter would have failed; the background ones still wait.
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(q.waiting, 2);
    cancel.cancel();
    await assert.rejects(gone, code("MP_ERR_REQUEST_CANCELED"));
    q.release(held);
    assert.equal(await stays, 1);
    assert.equal(q.waiting, 0);
  });
});
