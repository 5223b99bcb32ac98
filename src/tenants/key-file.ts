// The key file: named API keys with a role, the models each may use and its limits. The file
// holds each key's SHA-256, never the key; `modelport keys create NAME` makes a key, prints it
// once and appends its entry. The server reads the file at start and again on change or SIGHUP.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { parse as parseYaml, stringify } from "yaml";
import { z } from "zod";
import { MAX_CONFIG_DEPTH, yamlDepthExceeds } from "../yaml-depth.js";
import type { KeyLimits, Principal, Role } from "./principal.js";

/** Names show in metrics labels, logs and usage: short, and nothing a label or a path would mangle. */
export const KEY_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const positive = z.number().positive();
const count = z.number().int().positive();

export const keyLimitsSchema = z
  .object({
    requestsPerSecond: positive.optional(),
    burst: count.optional(),
    concurrent: count.optional(),
    tokensPerMinute: count.optional(),
    queuedJobs: count.optional(),
  })
  .strict();

const keyEntrySchema = z
  .object({
    name: z.string().regex(KEY_NAME, "names are 1 to 64 letters, digits, '_', '.' or '-'"),
    hash: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'expected "sha256:" and 64 lowercase hex digits'),
    role: z.enum(["admin", "client", "metrics"]).default("client"),
    /** Model names the key may use; absent: every model. A metrics key uses none. */
    models: z.array(z.string().min(1)).optional(),
    limits: keyLimitsSchema.default({}),
  })
  .strict();

export const keyFileSchema = z
  .object({ keys: z.array(keyEntrySchema).default([]) })
  .strict()
  .superRefine((file, ctx) => {
    const names = new Set<string>();
    const hashes = new Set<string>();
    file.keys.forEach((k, i) => {
      if (names.has(k.name))
        ctx.addIssue({ code: "custom", path: ["keys", i, "name"], message: `'${k.name}' twice` });
      if (hashes.has(k.hash))
        ctx.addIssue({ code: "custom", path: ["keys", i, "hash"], message: "the same key twice" });
      names.add(k.name);
      hashes.add(k.hash);
      if (k.role === "metrics" && k.models !== undefined)
        ctx.addIssue({
          code: "custom",
          path: ["keys", i, "models"],
          message: "a metrics key reads /metrics and /readyz and uses no model; drop models",
        });
    });
  });

export type KeyEntry = z.output<typeof keyEntrySchema>;

/** The digest a key file stores for `key`. */
export function keyHash(key: string): string {
  return `sha256:${createHash("sha256").update(key).digest("hex")}`;
}

/** The key's principal, as the server holds it. */
export function principalOf(entry: KeyEntry): Principal {
  return Object.freeze({
    name: entry.name,
    role: entry.role,
    // A metrics key may use no model: every model route answers it as for a model that does not
    // exist, should one ever reach the model look-up (its routes refuse it before that).
    ...(entry.role === "metrics"
      ? { models: new Set<string>() }
      : entry.models
        ? { models: new Set(entry.models) }
        : {}),
    limits: Object.freeze({ ...entry.limits }) as KeyLimits,
    limitsSet: Object.keys(entry.limits).length > 0,
  });
}

/**
 * Reads and validates a key file.
 * @throws Error naming the file and every problem (the server keeps its previous keys on reload).
 */
export function readKeyFile(path: string): KeyEntry[] {
  let raw: unknown;
  try {
    const text = readFileSync(path, "utf8");
    // Checked before yaml composes it: a file nested thousands deep can end the process there.
    if (yamlDepthExceeds(text, MAX_CONFIG_DEPTH))
      throw new Error(`nests mappings and lists deeper than ${MAX_CONFIG_DEPTH} levels`);
    raw = parseYaml(text) ?? {};
  } catch (err) {
    throw new Error(`key file ${path}: ${(err as Error).message}`);
  }
  const parsed = keyFileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(top)"}: ${i.message}`);
    throw new Error(`key file ${path}: ${problems.join("; ")}`);
  }
  return parsed.data.keys;
}

export interface CreatedKey {
  /** The key itself: shown once, stored nowhere. */
  key: string;
  entry: KeyEntry;
}

/**
 * Makes a random key named `name`, appends its entry to `path` (created, mode 0600, when missing)
 * and returns the key. The file is replaced atomically, so a server watching it never reads half.
 * @throws Error when the name is taken or the file is invalid.
 */
export function createKey(
  path: string,
  name: string,
  options: { role?: Role; models?: string[]; limits?: KeyLimits } = {},
): CreatedKey {
  const keys = existsSync(path) ? readKeyFile(path) : [];
  if (keys.some((k) => k.name === name))
    throw new Error(`key file ${path}: a key named '${name}' already exists`);
  const key = `mp_${randomBytes(32).toString("base64url")}`;
  const entry = keyEntrySchema.parse({
    name,
    hash: keyHash(key),
    role: options.role ?? "client",
    ...(options.models ? { models: options.models } : {}),
    ...(options.limits && Object.keys(options.limits).length ? { limits: options.limits } : {}),
  });
  const file = {
    keys: [...keys, entry].map(({ limits, ...k }) => (Object.keys(limits).length ? { ...k, limits } : k)),
  };
  // The file as the server will read it: a key it would refuse (a metrics key with models) is not written.
  const checked = keyFileSchema.safeParse(file);
  if (!checked.success)
    throw new Error(`key '${name}': ${checked.error.issues.map((i) => i.message).join("; ")}`);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, stringify(file), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
  return { key, entry };
}
