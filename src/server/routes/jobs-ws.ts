// GET /v1/jobs/ws (WebSocket): one connection, many jobs. The client sends
// {"subscribe": [ids]} / {"unsubscribe": [ids]}; the server sends {"type": "job", "job": {...}}
// at once and on every change, and {"type": "error", ...} for unknown ids or bad messages.
import websocket from "@fastify/websocket";
import type { FastifyInstance } from "fastify";
import type { Job } from "../../jobs/job.js";
import { isFinal, type JobQueue } from "../../jobs/job-queue.js";
import { jobView } from "../../jobs/job-view.js";

const MAX_SUBSCRIPTIONS = 1000;
/** Changes made by another process sharing the store arrive by polling at this pace. */
const POLL_MS = 1000;

export function jobsWebSocketRoute(app: FastifyInstance, queue: JobQueue): void {
  app.register(async (scope) => {
    await scope.register(websocket, { options: { maxPayload: 64 * 1024 } });
    scope.get("/v1/jobs/ws", { websocket: true }, (socket) => {
      const subs = new Map<string, { off: () => void; last: string }>();
      const send = (msg: unknown) => {
        if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(msg));
      };
      const push = (job: Job) => {
        const sub = subs.get(job.id);
        if (!sub) return;
        const data = JSON.stringify(jobView(job));
        if (data === sub.last) return;
        sub.last = data;
        send({ type: "job", job: JSON.parse(data) });
        if (isFinal(job)) {
          sub.off();
          subs.delete(job.id);
        }
      };
      const subscribe = async (id: string) => {
        if (subs.has(id)) return;
        if (subs.size >= MAX_SUBSCRIPTIONS)
          return send({
            type: "error",
            id,
            error: `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection`,
          });
        const job = await queue.get(id);
        if (!job) return send({ type: "error", id, code: "MP_ERR_JOB_NOT_FOUND", error: `no job '${id}'` });
        subs.set(id, { off: queue.events.subscribe(id, push), last: "" });
        push(job);
      };
      const poll = setInterval(async () => {
        for (const id of subs.keys()) {
          const job = await queue.get(id).catch(() => undefined);
          if (job) push(job);
        }
      }, POLL_MS);
      socket.on("message", (raw: Buffer) => {
        let msg: { subscribe?: unknown; unsubscribe?: unknown };
        try {
          msg = JSON.parse(String(raw));
        } catch {
          return send({
            type: "error",
            code: "MP_ERR_REQUEST_MALFORMED_JSON",
            error: "messages must be JSON",
          });
        }
        const ids = (v: unknown) =>
          Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];
        for (const id of ids(msg.subscribe)) void subscribe(id);
        for (const id of ids(msg.unsubscribe)) {
          subs.get(id)?.off();
          subs.delete(id);
        }
        if (!("subscribe" in msg) && !("unsubscribe" in msg)) {
          send({
            type: "error",
            code: "MP_ERR_REQUEST_INVALID",
            error: 'send {"subscribe": ["<job id>", ...]}',
          });
        }
      });
      socket.on("close", () => {
        clearInterval(poll);
        for (const s of subs.values()) s.off();
        subs.clear();
      });
    });
  });
}
