// Who may call: every key the server accepts, by name. Keys come from the key file (named, with
// roles, models and limits; re-read on change or SIGHUP) and from server.apiKeys / adminKeys
// (unnamed keys of the command line, named api-key-N and admin-key-N). A key is looked up by its
// SHA-256, so the time taken says nothing about how close a wrong key came. A reload tells its
// listeners which key names it revoked, so what those keys hold open can be ended.
import { createHash } from "node:crypto";
import { unwatchFile, watchFile } from "node:fs";
import type { Logger } from "pino";
import { ModelportError } from "../errors.js";
import { keyHash, principalOf, readKeyFile } from "./key-file.js";
import { ANONYMOUS, type Principal } from "./principal.js";

export interface TenantsOptions {
  apiKeys?: readonly string[];
  adminKeys?: readonly string[];
  /** The key file; its keys replace the file's previous ones on reload(). */
  keysFile?: string | undefined;
  log?: Logger;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

/** True for an address of the loopback interface: 127.0.0.0/8, ::1, and 127.x.y.z mapped into IPv6. */
export function isLoopback(address: string | undefined): boolean {
  return LOOPBACK.test(address ?? "");
}

export class Tenants {
  /** Keys by their digest: the command line's, then the file's (re-read on reload). */
  #fixed = new Map<string, Principal>();
  #fromFile = new Map<string, Principal>();
  #names: string[] = [];
  /** The digest each key file principal was let in by, to tell whether a reload revoked it. */
  readonly #hashOf = new WeakMap<Principal, string>();
  readonly #onRevoke = new Set<(names: readonly string[]) => void>();
  readonly #file: string | undefined;
  readonly #log: Logger | undefined;
  /** True when callers must present a key: API keys or a key file configured. */
  readonly required: boolean;

  constructor(options: TenantsOptions) {
    const admin = options.adminKeys ?? [];
    const api = options.apiKeys ?? [];
    for (const [i, k] of api.entries())
      this.#fixed.set(keyHash(k), { name: `api-key-${i + 1}`, role: "client", limits: {} });
    for (const [i, k] of admin.entries())
      this.#fixed.set(keyHash(k), { name: `admin-key-${i + 1}`, role: "admin", limits: {} });
    this.#file = options.keysFile;
    this.#log = options.log;
    this.required = api.length > 0 || this.#file !== undefined;
    if (this.#file !== undefined) this.#load(readKeyFile(this.#file));
    else this.#index();
  }

  /** Every key's name (the bound on the key label of the metrics), anonymous included. */
  get names(): readonly string[] {
    return this.#names;
  }

  /** True when some key may manage the server (admin role). */
  get hasAdmin(): boolean {
    for (const p of this.#all()) if (p.role === "admin") return true;
    return false;
  }

  /**
   * The caller of a request with this Authorization header.
   * @throws ModelportError MP_ERR_AUTH_REQUIRED without a header and MP_ERR_AUTH_INVALID for a key
   * that is not `Bearer <key>` of a configured key, where keys are required. A server without
   * required keys lets anyone in as `anonymous`, or as the admin whose key is presented.
   */
  authenticate(authorization: string | undefined): Principal {
    const match = authorization ? /^Bearer\s+(.+)$/i.exec(authorization) : null;
    const found = match ? this.#lookup(match[1]!.trim()) : undefined;
    if (found) return found;
    if (!this.required) return ANONYMOUS;
    if (!authorization) {
      throw new ModelportError(
        "MP_ERR_AUTH_REQUIRED",
        "this server needs an API key: send Authorization: Bearer <key>",
      );
    }
    throw new ModelportError(
      "MP_ERR_AUTH_INVALID",
      "the API key is not valid; check the Authorization: Bearer header",
    );
  }

  /** Whether `principal`, calling from `remoteAddress`, may manage the server (checkAdmin's rule). */
  mayManage(principal: Principal, remoteAddress: string | undefined): boolean {
    if (principal.role === "admin") return true;
    return !this.required && !this.hasAdmin && isLoopback(remoteAddress);
  }

  /**
   * The caller of a probe (which never needs a key): the principal of a valid key, anonymous on a
   * server without required keys, and undefined where keys are required and none valid came.
   */
  identify(authorization: string | undefined): Principal | undefined {
    try {
      return this.authenticate(authorization);
    } catch {
      return undefined;
    }
  }

  /**
   * Lets an admin through, or throws MP_ERR_ADMIN_REQUIRED. A server with no key at all (no
   * API, admin or file keys) lets callers on its own loopback interface manage it (development).
   */
  checkAdmin(principal: Principal, remoteAddress: string | undefined): void {
    if (this.mayManage(principal, remoteAddress)) return;
    const open = !this.required && !this.hasAdmin;
    throw new ModelportError(
      "MP_ERR_ADMIN_REQUIRED",
      open
        ? "management routes answer only loopback callers on a server without keys; configure an admin key (--admin-key, or role: admin in the key file) to manage it remotely"
        : "this route needs an admin key (role: admin in the key file, or server.adminKeys)",
    );
  }

  /**
   * Lets a caller use shared memory, or throws MP_ERR_SHARED_MEMORY_REMOTE: a caller let in without
   * a key (a server with no API keys) must be on the loopback interface, as management is on such a
   * server, since a region makes the server read and write a file of this host for it. A request
   * let in by a key revoked since (MP_ERR_AUTH_KEY_REVOKED) may not reach the regions of that name.
   */
  checkSharedMemory(principal: Principal | undefined, remoteAddress: string | undefined): void {
    if (principal !== undefined && this.isRevoked(principal)) {
      throw new ModelportError(
        "MP_ERR_AUTH_KEY_REVOKED",
        `the API key '${principal.name}' was removed from the key file (or changed) after this request arrived; use a current key`,
      );
    }
    if (this.required || principal?.role === "admin" || isLoopback(remoteAddress)) return;
    throw new ModelportError(
      "MP_ERR_SHARED_MEMORY_REMOTE",
      "shared memory answers only loopback callers (127.0.0.1, ::1) on a server without API keys; connect over loopback, or give the server keys",
    );
  }

  /**
   * True when `principal` was let in by a key that a reload has since revoked (removed from the key
   * file, or its hash changed): it came in before the reload and must not open anything now.
   */
  isRevoked(principal: Principal): boolean {
    const hash = this.#hashOf.get(principal);
    return hash !== undefined && this.#fromFile.get(hash)?.name !== principal.name;
  }

  /**
   * Calls `listener` with the names of the keys each reload revokes (a key removed from the file,
   * or whose hash changed: that is a removed key plus a new one); returns the unsubscribe.
   */
  onRevoke(listener: (names: readonly string[]) => void): () => void {
    this.#onRevoke.add(listener);
    return () => this.#onRevoke.delete(listener);
  }

  /**
   * Re-reads the key file. A file that cannot be read or is invalid changes nothing: the server
   * keeps the keys it had and logs why. Returns true when the new keys are in force.
   */
  reload(): boolean {
    if (this.#file === undefined) return false;
    try {
      const entries = readKeyFile(this.#file);
      const revoked = this.#load(entries);
      this.#log?.info({ keys: entries.length, file: this.#file, revoked }, "key file reloaded");
      if (revoked.length > 0) this.#revoke(revoked);
      return true;
    } catch (err) {
      this.#log?.error({ file: this.#file }, `${(err as Error).message}; keeping the previous keys`);
      return false;
    }
  }

  /** Tells each listener which keys were revoked; one that fails does not keep the others from it. */
  #revoke(names: readonly string[]): void {
    for (const listener of this.#onRevoke) {
      try {
        listener(names);
      } catch (err) {
        this.#log?.error({ err }, "ending what the revoked keys held failed");
      }
    }
  }

  /** Reloads on SIGHUP and when the file changes (polled every `intervalMs`); returns the stop. */
  watch(intervalMs = 1000): () => void {
    const file = this.#file;
    if (file === undefined) return () => {};
    const onHup = () => this.reload();
    process.on("SIGHUP", onHup);
    const listener = (cur: { mtimeMs: number; size: number }, prev: { mtimeMs: number; size: number }) => {
      if (cur.mtimeMs !== prev.mtimeMs || cur.size !== prev.size) this.reload();
    };
    watchFile(file, { interval: intervalMs, persistent: false }, listener);
    return () => {
      process.off("SIGHUP", onHup);
      unwatchFile(file, listener);
    };
  }

  #lookup(key: string): Principal | undefined {
    const digest = `sha256:${createHash("sha256").update(key).digest("hex")}`;
    return this.#fromFile.get(digest) ?? this.#fixed.get(digest);
  }

  /** Puts `entries` in force; returns the names of the keys this revokes. */
  #load(entries: ReturnType<typeof readKeyFile>): string[] {
    const next = new Map<string, Principal>();
    for (const e of entries) {
      const p = principalOf(e);
      this.#hashOf.set(p, e.hash);
      next.set(e.hash, p);
    }
    const revoked: string[] = [];
    for (const [hash, p] of this.#fromFile) if (next.get(hash)?.name !== p.name) revoked.push(p.name);
    this.#fromFile = next;
    this.#index();
    return revoked;
  }

  *#all(): Iterable<Principal> {
    yield* this.#fixed.values();
    yield* this.#fromFile.values();
  }

  #index(): void {
    const names = new Set([ANONYMOUS.name]);
    for (const p of this.#all()) names.add(p.name);
    this.#names = [...names];
  }
}

/** True when `principal` may use the model `name` (its key lists the models it may use, or none). */
export function mayUse(principal: Principal, name: string): boolean {
  return principal.models === undefined || principal.models.has(name);
}

/** The name a scope is checked by: `name@version` is its model's unless the scope lists it whole. */
function scopedName(models: ReadonlySet<string>, name: string): string {
  const at = name.lastIndexOf("@");
  return at > 0 && !models.has(name) ? name.slice(0, at) : name;
}

/** Whether `principal` may use the model `name` (also as `name@version`). */
export function mayAccess(principal: Principal | undefined, name: string): boolean {
  return principal?.models === undefined || principal.models.has(scopedName(principal.models, name));
}

/**
 * Throws unless `principal` may use the model `name` (also as `name@version`). A key that may not
 * hears the same 404 as for a model that does not exist, so keys cannot probe what a server holds.
 * `served` says whether a name is served: a key limited to some models then gets this same 404
 * for a name it lists that is not served, never the catalogue's own one, which lists every model.
 * @throws ModelportError MP_ERR_MODEL_NOT_FOUND
 */
export function checkAccess(
  principal: Principal | undefined,
  name: string,
  served?: (name: string) => boolean,
): void {
  if (principal?.models === undefined) return;
  const base = scopedName(principal.models, name);
  if (principal.models.has(base) && (served === undefined || served(name) || served(base))) return;
  throw new ModelportError("MP_ERR_MODEL_NOT_FOUND", `model '${base}' is not served here`, {
    model: base,
    param: "model",
  });
}

/**
 * Throws for a metrics key (role metrics) on anything but GET /metrics, before any other check:
 * it reads the server's metrics and readiness and nothing else.
 * @throws ModelportError MP_ERR_ROLE_FORBIDDEN
 */
export function checkRole(principal: Principal, what: string): void {
  if (principal.role !== "metrics") return;
  throw new ModelportError(
    "MP_ERR_ROLE_FORBIDDEN",
    `key '${principal.name}' has role metrics: it reads GET /metrics and /readyz only, not ${what}; use a client or admin key`,
  );
}
