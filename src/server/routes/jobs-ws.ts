// GET /v1/jobs/ws (WebSocket): one connection, many jobs. The client sends
// {"subscribe": [ids]} / {"unsubscribe": [ids]}; the server sends {"type": "job", "job": {...}}
// at once and on every change, and {"type": "error", "code": "MP_ERR_...", ...} for unknown ids,
// refused or malformed frames and store failures. No frame can end the connection or the process:
// every frame is validated, every store call's failure becomes an error frame. Each connection
// holds a stream slot, follows a set of at most jobs.maxSubscriptionsPerSocket jobs (one listener
// per job, all removed on unsubscribe and close), and is pinged every limits.streamHeartbeatMs.
// A connection whose key is revoked by a key file reload gets an error frame and is closed (1008).
import websocket from "@fastify/websocket";
import type { FastifyPluginAsync } from "fastify";
import type { WebSocket } from "ws";
import { z } from "zod";
import { type ErrorCode, isModelportError, ModelportError } from "../../errors.js";
import type { Job } from "../../jobs/job.js";
import { isFinal } from "../../jobs/job-queue.js";
import { jobView } from "../../jobs/job-view.js";
import type { Principal } from "../../tenants/principal.js";
import { jobScope } from "./jobs.js";

/** Largest frame accepted; a larger one closes the connection with 1009 (message too big). */
export const MAX_FRAME_BYTES = 64 * 1024;
/**
 * Most bytes queued for a client that does not read; past it the connection is dropped (every
 * frame it sends can cause an answer, so an unread queue would otherwise grow without bound).
 */
export const MAX_UNREAD_BYTES = 1024 * 1024;
/** The close code of a connection whose key was revoked: 1008, policy violation (RFC 6455). */
export const CLOSE_KEY_REVOKED = 1008;

const ids = z.array(z.string().min(1).max(256));
const frameSchema = z
  .object({ subscribe: ids.optional(), unsubscribe: ids.optional() })
  .strict()
  .refine((f) => f.subscribe !== undefined || f.unsubscribe !== undefined, {
    message: "a frame needs subscribe or unsubscribe",
  });

const USAGE = 'send {"subscribe": ["<job id>", ...]} or {"unsubscribe": ["<job id>", ...]}';

interface Subscription {
  /** Removes the event listener and stops following; unset while the first read is in flight. */
  off?: () => void;
  /** The last view sent, so an unchanged job is not sent twice. */
  last: string;
}

export const jobsWebSocketRoute: FastifyPluginAsync = async (app) => {
  const ctx = app.modelport;
  const queue = ctx.jobs;
  const maxSubscriptions = ctx.config.jobs.maxSubscriptionsPerSocket;
  const heartbeatMs = ctx.config.limits.streamHeartbeatMs;
  app.register(async (scope) => {
    await scope.register(websocket, { options: { maxPayload: MAX_FRAME_BYTES } });
    scope.route({
      method: "GET",
      url: "/v1/jobs/ws",
      // Before the upgrade: over the stream limits the client gets the HTTP error (429/503).
      // The slot is held until the connection's socket closes, however it ends.
      preValidation: async (req) => {
        // A plain GET on this path is answered like any request and holds nothing.
        if (!req.ws) return;
        const slot = ctx.streams.acquire(req.headers);
        req.raw.socket.once("close", () => slot.release());
      },
      // A plain GET (no Upgrade header) gets a coded 426 naming the protocol to use.
      handler: async (_req, reply) => {
        reply.header("upgrade", "websocket");
        throw new ModelportError(
          "MP_ERR_REQUEST_UPGRADE_REQUIRED",
          "GET /v1/jobs/ws is a WebSocket: connect with a WebSocket client (Upgrade: websocket)",
        );
      },
      wsHandler: (socket, req) => serve(socket, jobScope(ctx, req), req.principal),
    });
  });

  /**
   * `scope`: the key name whose jobs this connection may follow (undefined: every job); `principal`:
   * the key it came in with, whose revocation closes it.
   */
  function serve(socket: WebSocket, scope: string | undefined, principal: Principal | undefined): void {
    const subs = new Map<string, Subscription>();
    let closed = false;
    const send = (msg: unknown) => {
      if (closed || socket.readyState !== socket.OPEN) return;
      if (socket.bufferedAmount > MAX_UNREAD_BYTES) return void socket.terminate();
      socket.send(JSON.stringify(msg));
    };
    const sendError = (code: ErrorCode, error: string, id?: string) =>
      send({ type: "error", code, error, ...(id !== undefined ? { id } : {}) });
    const sendFailure = (err: unknown, id: string) => {
      if (isModelportError(err)) sendError(err.code, err.message, id);
      else sendError("MP_ERR_JOB_STORE_UNAVAILABLE", "the job store could not be read; retry", id);
    };
    const drop = (id: string) => {
      subs.get(id)?.off?.();
      subs.delete(id);
    };
    const push = (job: Job) => {
      const sub = subs.get(job.id);
      if (!sub?.off) return;
      const data = JSON.stringify(jobView(job));
      if (data === sub.last) return;
      sub.last = data;
      send({ type: "job", job: JSON.parse(data) });
      if (isFinal(job)) drop(job.id);
    };
    const subscribe = async (id: string) => {
      // A set: subscribing again to a job already followed (or being looked up) changes nothing.
      if (subs.has(id)) return;
      if (subs.size >= maxSubscriptions) {
        return sendError(
          "MP_ERR_JOB_SUBSCRIPTIONS_EXCEEDED",
          `at most ${maxSubscriptions} subscriptions per connection (jobs.maxSubscriptionsPerSocket); unsubscribe first`,
          id,
        );
      }
      const sub: Subscription = { last: "" };
      subs.set(id, sub);
      let job: Job | undefined;
      try {
        job = await queue.get(id);
      } catch (err) {
        if (subs.get(id) === sub) subs.delete(id);
        return sendFailure(err, id);
      }
      // Unsubscribed, or the connection closed, while the job was being read.
      if (closed || subs.get(id) !== sub) return;
      // Another key's job is "not found", exactly as a job that does not exist.
      if (job && scope !== undefined && job.owner !== scope) job = undefined;
      if (!job) {
        subs.delete(id);
        return sendError("MP_ERR_JOB_NOT_FOUND", `no job '${id}'`, id);
      }
      // In-process changes as events; another process's found by the queue's shared watch.
      const off = queue.events.subscribe(id, push);
      const unfollow = queue.watch.follow(job);
      sub.off = () => {
        off();
        unfollow();
      };
      push(job);
    };
    const onFrame = (raw: unknown, isBinary: boolean) => {
      if (isBinary) return sendError("MP_ERR_REQUEST_INVALID", `frames are JSON text; ${USAGE}`);
      let value: unknown;
      try {
        value = JSON.parse(String(raw));
      } catch {
        return sendError("MP_ERR_REQUEST_MALFORMED_JSON", `frames must be JSON; ${USAGE}`);
      }
      const frame = frameSchema.safeParse(value);
      if (!frame.success) {
        const issue = frame.error.issues[0];
        const where = issue?.path.length ? `${issue.path.join(".")}: ` : "";
        return sendError("MP_ERR_REQUEST_INVALID", `${where}${issue?.message ?? "invalid frame"}; ${USAGE}`);
      }
      for (const id of frame.data.unsubscribe ?? []) drop(id);
      for (const id of new Set(frame.data.subscribe ?? [])) void subscribe(id);
    };
    socket.on("message", (raw: unknown, isBinary: boolean) => {
      try {
        onFrame(raw, isBinary);
      } catch (err) {
        // Only a defect gets here; the connection and the process carry on.
        sendError("MP_ERR_SERVER_INTERNAL", `the frame could not be handled: ${String(err)}`);
      }
    });

    // A client that stops answering pings is dropped, and its slot and listeners go with it.
    let alive = true;
    socket.on("pong", () => {
      alive = true;
    });
    const heartbeat = setInterval(() => {
      if (!alive) return socket.terminate();
      alive = false;
      socket.ping();
    }, heartbeatMs);

    // The key revoked: the reason as an error frame (clients that read frames see the code), then a
    // close with the code and reason (clients that only watch the close see them too).
    const closeChannel = ctx.channels.open(principal, (reason) => {
      sendError(reason.code, reason.message);
      closed = true;
      socket.close(CLOSE_KEY_REVOKED, reason.code);
    });

    socket.on("error", () => {
      // A protocol error (an oversized frame: 1009) is followed by close, which cleans up.
    });
    socket.on("close", () => {
      closed = true;
      closeChannel();
      clearInterval(heartbeat);
      for (const sub of subs.values()) sub.off?.();
      subs.clear();
    });
  }
};
