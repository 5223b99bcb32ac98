// Who may call: every key the server accepts, by name. Keys come from the key file (named, with
// roles, models and limits; re-read on change or SIGHUP) and from server.apiKeys / adminKeys
// (unnamed keys of the command line, named api-key-N and admin-key-N). A key is looked up by its
// SHA-256, so the time taken says nothing about how close a wrong key came.
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

export class Tenants {
  /** Keys by their digest: the command line's, then the file's (re-read on reload). */
  #fixed = new Map<string, Principal>();
  #fromFile = new Map<string, Principal>();
  #names: string[] = [];
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
    return !this.required && !this.hasAdmin && LOOPBACK.test(remoteAddress ?? "");
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
   * Re-reads the key file. A file that cannot be read or is invalid changes nothing: the server
   * keeps the keys it had and logs why. Returns true when the new keys are in force.
   */
  reload(): boolean {
    if (this.#file === undefined) return false;
    try {
      const entries = readKeyFile(this.#file);
      this.#load(entries);
      this.#log?.info({ keys: entries.length, file: this.#file }, "key file reloaded");
      return true;
    } catch (err) {
      this.#log?.error({ file: this.#file }, `${(err as Error).message}; keeping the previous keys`);
      return false;
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

  #load(entries: ReturnType<typeof readKeyFile>): void {
    const next = new Map<string, Principal>();
    for (const e of entries) next.set(e.hash, principalOf(e));
    this.#fromFile = next;
    this.#index();
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
 * @throws ModelportError MP_ERR_MODEL_NOT_FOUND
 */
export function checkAccess(principal: Principal | undefined, name: string): void {
  if (principal?.models === undefined) return;
  const base = scopedName(principal.models, name);
  if (principal.models.has(base)) return;
  throw new ModelportError("MP_ERR_MODEL_NOT_FOUND", `model '${base}' is not served here`, {
    model: base,
    param: "model",
  });
}
