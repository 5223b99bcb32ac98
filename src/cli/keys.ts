// `modelport keys create|list`: named API keys in the key file (docs/Multi-tenant.md). `create`
// prints the new key once and stores only its SHA-256; a running server picks the file up on
// its own (it watches the file) or on SIGHUP.
import { existsSync } from "node:fs";
import { createKey, readKeyFile } from "../tenants/key-file.js";
import type { KeyLimits } from "../tenants/principal.js";
import { parse, UsageError } from "./args.js";

export const KEYS_HELP = `Usage: modelport keys <action> [NAME] [options]

  create NAME             make a random key named NAME, print it once and add its hash to the file
  list                    the file's keys: name, role, models, limits (never the keys)

Options:
      --keys FILE                  the key file (default ./modelport-keys.yaml; created if missing, mode 0600)
      --role admin|client|metrics  what the key may do (default client: models and its own jobs;
                                   metrics: GET /metrics and /readyz only, for a Prometheus scrape)
      --models A,B                 the models the key may use (default: every model)
      --requests-per-second N      sustained request rate (token bucket)
      --burst N                    requests at once after a quiet spell (default: one second's worth)
      --concurrent N               requests in flight at once
      --tokens-per-minute N        prompt + completion tokens per minute (language models)
      --queued-jobs N              jobs queued or running at once
  -h, --help                       show this help

Exit status: 0 on success; 1 when the file is invalid or the name is taken; 2 on a usage error.
`;

const LIMIT_FLAGS = {
  "requests-per-second": "requestsPerSecond",
  burst: "burst",
  concurrent: "concurrent",
  "tokens-per-minute": "tokensPerMinute",
  "queued-jobs": "queuedJobs",
} as const;

export async function keys(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    keys: { type: "string" },
    role: { type: "string" },
    models: { type: "string" },
    "requests-per-second": { type: "string" },
    burst: { type: "string" },
    concurrent: { type: "string" },
    "tokens-per-minute": { type: "string" },
    "queued-jobs": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  const [action, name, ...more] = positionals;
  if (values.help || !action) {
    process.stdout.write(KEYS_HELP);
    return values.help ? 0 : 2;
  }
  if (more.length) throw new UsageError(`keys ${action}: unexpected ${more.join(" ")}`);
  const file = values.keys ?? "modelport-keys.yaml";
  if (action === "list") {
    if (!existsSync(file)) throw new UsageError(`keys list: ${file} does not exist; give --keys FILE`);
    try {
      for (const k of readKeyFile(file)) {
        const limits = Object.entries(k.limits).map(([l, n]) => `${l}=${n}`);
        process.stdout.write(
          `${k.name}\t${k.role}\t${k.role === "metrics" ? "-" : (k.models?.join(",") ?? "*")}\t${limits.join(" ") || "no limits"}\n`,
        );
      }
      return 0;
    } catch (err) {
      process.stderr.write(`modelport: ${(err as Error).message}\n`);
      return 1;
    }
  }
  if (action !== "create") throw new UsageError(`unknown keys action '${action}'; use create or list`);
  if (!name) throw new UsageError("keys create needs a name");
  const role = values.role ?? "client";
  if (role !== "admin" && role !== "client" && role !== "metrics")
    throw new UsageError(`--role must be admin, client or metrics, got '${role}'`);
  if (role === "metrics" && values.models !== undefined)
    throw new UsageError("--models does not go with --role metrics: a metrics key uses no model");
  const limits: Record<string, number> = {};
  for (const [flag, key] of Object.entries(LIMIT_FLAGS)) {
    const v = values[flag as keyof typeof LIMIT_FLAGS];
    if (v === undefined) continue;
    const n = Number(v);
    if (!(n > 0)) throw new UsageError(`--${flag} must be a positive number, got '${v}'`);
    limits[key] = n;
  }
  const models = values.models
    ?.split(",")
    .map((m) => m.trim())
    .filter(Boolean);
  try {
    const created = createKey(file, name, {
      role,
      ...(models?.length ? { models } : {}),
      limits: limits as KeyLimits,
    });
    process.stderr.write(
      `key '${name}' (${role}) added to ${file}; it is shown once, here; a server with --keys ${file} takes it within a second\n`,
    );
    process.stdout.write(`${created.key}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`modelport: ${(err as Error).message}\n`);
    return 1;
  }
}
