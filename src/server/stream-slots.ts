// Counts the long-lived connections (job event streams, job WebSockets) the server holds, in
// total and per API key, and refuses one more beyond limits.maxStreams / limits.maxStreamsPerKey,
// so no client can pin an unbounded number of sockets, timers and listeners.
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { ModelportError } from "../errors.js";

export interface StreamLimits {
  readonly maxStreams: number;
  readonly maxStreamsPerKey: number;
}

/** One held connection; release() is idempotent. */
export interface StreamSlot {
  readonly key: string;
  release(): void;
}

/** Clients without a bearer token all count as this one key. */
export const ANONYMOUS_KEY = "anonymous";

/**
 * The identity a connection is counted under: a hash of its bearer token (never the token
 * itself), or ANONYMOUS_KEY.
 */
export function streamKey(headers: IncomingHttpHeaders): string {
  const match = /^Bearer\s+(.+)$/i.exec(headers.authorization ?? "");
  if (!match) return ANONYMOUS_KEY;
  return `key-${createHash("sha256").update(match[1]!.trim()).digest("hex").slice(0, 16)}`;
}

export class StreamSlots {
  private total = 0;
  private readonly perKey = new Map<string, number>();

  constructor(private readonly limits: StreamLimits) {}

  /**
   * Takes a slot for a connection with these request headers.
   * @throws MP_ERR_STREAM_KEY_LIMIT_REACHED (429) or MP_ERR_STREAM_LIMIT_REACHED (503).
   */
  acquire(headers: IncomingHttpHeaders): StreamSlot {
    const key = streamKey(headers);
    const held = this.perKey.get(key) ?? 0;
    if (held >= this.limits.maxStreamsPerKey) {
      throw new ModelportError(
        "MP_ERR_STREAM_KEY_LIMIT_REACHED",
        `this API key already holds ${held} event streams and WebSockets (limits.maxStreamsPerKey); close one first`,
        { limit: this.limits.maxStreamsPerKey },
      );
    }
    if (this.total >= this.limits.maxStreams) {
      throw new ModelportError(
        "MP_ERR_STREAM_LIMIT_REACHED",
        `the server already holds ${this.total} event streams and WebSockets (limits.maxStreams); retry later`,
        { limit: this.limits.maxStreams, retryAfterSeconds: 5 },
      );
    }
    this.total++;
    this.perKey.set(key, held + 1);
    let released = false;
    return {
      key,
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const n = (this.perKey.get(key) ?? 1) - 1;
        if (n > 0) this.perKey.set(key, n);
        else this.perKey.delete(key);
      },
    };
  }

  /** Connections held now, in total or for one key. */
  held(key?: string): number {
    return key === undefined ? this.total : (this.perKey.get(key) ?? 0);
  }
}
