// API keys as every surface checks them: `Bearer <key>` in the Authorization header (HTTP) or
// the `authorization` metadata entry (gRPC), compared in constant time against each configured key.
import { createHash, timingSafeEqual } from "node:crypto";
import { ModelportError } from "../errors.js";

// Digests, not the keys themselves: timingSafeEqual needs equal lengths, and comparing digests
// keeps the time independent of how long the configured keys are.
const digest = (s: string) => createHash("sha256").update(s).digest();

export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  /** False when no key is configured: every caller is let in. */
  get required(): boolean {
    return this.digests.length > 0;
  }

  /**
   * Lets the caller in, or throws: MP_ERR_AUTH_REQUIRED without a header, MP_ERR_AUTH_INVALID when
   * it is not `Bearer <one of the keys>`. A no-op when no key is configured.
   */
  check(authorization: string | undefined): void {
    if (!this.required) return;
    if (!authorization) {
      throw new ModelportError(
        "MP_ERR_AUTH_REQUIRED",
        "this server needs an API key: send Authorization: Bearer <key>",
      );
    }
    const match = /^Bearer\s+(.+)$/i.exec(authorization);
    const given = match ? digest(match[1]!.trim()) : undefined;
    if (!given || !this.digests.some((d) => timingSafeEqual(d, given))) {
      throw new ModelportError(
        "MP_ERR_AUTH_INVALID",
        "the API key is not valid; check the Authorization: Bearer header",
      );
    }
  }
}
