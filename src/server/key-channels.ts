// The long-lived channels each key holds open (job event streams, job WebSockets, streamed OpenAI
// answers, long-polls), by key name, so that a key the key file no longer holds loses them when
// the file is reloaded: a key is checked once, when a request arrives, and a channel could
// otherwise outlive its key by minutes.
import { ModelportError } from "../errors.js";
import type { Principal } from "../tenants/principal.js";

/** Ends one channel, telling its client why (an SSE error event, a WebSocket close code, a 401). */
export type EndChannel = (reason: ModelportError) => void;

/** The error a revoked key's channels end with. */
export function keyRevoked(name: string): ModelportError {
  return new ModelportError(
    "MP_ERR_AUTH_KEY_REVOKED",
    `the API key '${name}' was removed from the key file (or changed) while this was open; use a current key`,
  );
}

export class KeyChannels {
  readonly #byKey = new Map<string, Set<EndChannel>>();

  /** `revoked(p)`: whether a reload has revoked the key `p` came in with (tenants' isRevoked). */
  constructor(private readonly revoked: (principal: Principal) => boolean) {}

  /**
   * Counts a channel of `principal` open until the function returned is called (idempotent).
   * `end` runs at most once, when the key is revoked; a key revoked between the request's arrival
   * and this call has its channel ended on the next microtask, after this returns.
   */
  open(principal: Principal | undefined, end: EndChannel): () => void {
    if (principal === undefined) return () => {};
    const name = principal.name;
    if (this.revoked(principal)) {
      queueMicrotask(() => end(keyRevoked(name)));
      return () => {};
    }
    let set = this.#byKey.get(name);
    if (!set) {
      set = new Set();
      this.#byKey.set(name, set);
    }
    const entry: EndChannel = (reason) => end(reason);
    set.add(entry);
    return () => {
      const held = this.#byKey.get(name);
      if (!held?.delete(entry)) return;
      if (held.size === 0) this.#byKey.delete(name);
    };
  }

  /** Ends every channel of the keys `names` (the key file no longer holds them). */
  revoke(names: readonly string[]): void {
    for (const name of names) {
      const held = this.#byKey.get(name);
      if (!held) continue;
      this.#byKey.delete(name);
      const reason = keyRevoked(name);
      for (const end of held) end(reason);
    }
  }

  /** Channels open now, of one key or of all. */
  held(name?: string): number {
    if (name !== undefined) return this.#byKey.get(name)?.size ?? 0;
    let n = 0;
    for (const set of this.#byKey.values()) n += set.size;
    return n;
  }
}
