// `modelport serve --processes N`: N front processes share the port, each with its own copy of
// the model; the primary replaces a process that dies, and on SIGTERM every process drains and
// exits, then the primary exits 0. Which process answered is read from X-Modelport-Instance
// (HOST:PID), over a fresh connection per request so connections spread over the processes.
import assert from "node:assert/strict";
import { request } from "node:http";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { type ChildServer, startChild, waitReady } from "../helpers/server.js";

let child: ChildServer | undefined;
after(async () => {
  await child?.stop("SIGKILL");
});

const BODY = JSON.stringify({ rows: [[3, 95, 4, 1, 0, 20]] });

/** One predict on a new connection: the answering process's pid and the answer, or undefined on a connection error. */
function predictOnce(url: string): Promise<{ pid: number; status: number; body: any } | undefined> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/v1/models/churn-tree/predict`,
      { method: "POST", agent: false, headers: { "content-type": "application/json" } },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          const instance = String(res.headers["x-modelport-instance"] ?? "");
          resolve({
            pid: Number(instance.split(":").at(-1)),
            status: res.statusCode ?? 0,
            body: JSON.parse(text),
          });
        });
      },
    );
    // A connection handed to a process at the moment it is killed is never answered: give up on it.
    req.setTimeout(10_000, () => req.destroy(new Error("no answer")));
    req.on("error", () => resolve(undefined));
    req.end(BODY);
  });
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Predicts until `enough(pids seen)` holds; every answer must be right. */
async function servePids(
  url: string,
  enough: (pids: Set<number>) => boolean,
  what: string,
): Promise<Set<number>> {
  const pids = new Set<number>();
  const deadline = Date.now() + 90_000;
  let expected: unknown;
  while (Date.now() < deadline) {
    const r = await predictOnce(url);
    if (r?.status === 200) {
      expected ??= r.body.outputs;
      assert.deepEqual(r.body.outputs, expected, "every process gives the same answer");
      pids.add(r.pid);
      if (enough(pids)) return pids;
    } else await new Promise((res) => setTimeout(res, 50));
  }
  assert.fail(`timed out waiting for ${what}; saw ${[...pids]}`);
}

describe("--processes N", () => {
  it("two processes serve; a killed one is replaced; SIGTERM stops them all and the primary exits 0", async () => {
    const model = join(await testModels(), "churn-tree.onnx");
    child = await startChild([model, "--processes", "2", "--drain-timeout-ms", "2000"]);
    assert.equal((await waitReady(child.url, 90_000)).status, 200, child.output().slice(-2000));
    const primary = child.proc.pid!;

    const first = await servePids(child.url, (p) => p.size === 2, "both processes to answer");
    assert.ok(!first.has(primary), "the primary itself does not serve");

    const [victim, survivor] = [...first] as [number, number];
    process.kill(victim, "SIGKILL");
    // The primary forks a replacement (after a 1 s back-off, as the victim lived under 5 s or
    // not), which loads its own model and starts answering.
    const later = await servePids(
      child.url,
      (p) => [...p].some((pid) => !first.has(pid)),
      "a replacement process to answer",
    );
    const replacement = [...later].find((pid) => !first.has(pid))!;
    assert.ok(!alive(victim));
    assert.ok(alive(survivor));
    assert.ok(alive(replacement));
    assert.match(child.output(), /a serving process died; starting another/);

    const code = await child.stop("SIGTERM");
    assert.equal(code, 0, child.output().slice(-2000));
    const gone = Date.now() + 30_000;
    while ((alive(survivor) || alive(replacement)) && Date.now() < gone)
      await new Promise((r) => setTimeout(r, 50));
    assert.ok(!alive(survivor), "the first process exited");
    assert.ok(!alive(replacement), "the replacement exited");
  });
});
