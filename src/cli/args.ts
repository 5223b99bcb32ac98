// Flag parsing shared by the commands: node's parseArgs plus number checks that name the flag.
import { readFileSync } from "node:fs";
import { type ParseArgsConfig, parseArgs } from "node:util";
import type { ServeFlags } from "../config/load.js";

export class UsageError extends Error {}

export const SERVE_OPTIONS = {
  config: { type: "string", short: "c" },
  host: { type: "string" },
  port: { type: "string", short: "p" },
  "grpc-port": { type: "string" },
  name: { type: "string" },
  backend: { type: "string" },
  threads: { type: "string" },
  "max-batch-rows": { type: "string" },
  "max-body-bytes": { type: "string" },
  sha256: { type: "string" },
  golden: { type: "string" },
  "api-key": { type: "string", multiple: true },
  "api-key-file": { type: "string", multiple: true },
  "admin-key": { type: "string", multiple: true },
  "admin-key-file": { type: "string", multiple: true },
  keys: { type: "string" },
  "allowed-host": { type: "string", multiple: true },
  "allowed-origin": { type: "string", multiple: true },
  repository: { type: "string" },
  "repository-poll-ms": { type: "string" },
  "max-connections": { type: "string" },
  "log-level": { type: "string" },
  "log-format": { type: "string" },
  "drain-timeout-ms": { type: "string" },
  processes: { type: "string" },
  "allow-oversubscription": { type: "boolean" },
  "shared-memory": { type: "boolean" },
  role: { type: "string" },
  runner: { type: "string", multiple: true },
  "instance-id": { type: "string" },
  "max-queue-rows": { type: "string" },
  "timeout-ms": { type: "string" },
  placement: { type: "string" },
  device: { type: "string" },
  "max-rss-mb": { type: "string" },
  batching: { type: "string" },
  "batch-max-rows": { type: "string" },
  "batch-max-delay-ms": { type: "string" },
  "batch-mode": { type: "string" },
  "inline-max-ms": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

export function parse<O extends NonNullable<ParseArgsConfig["options"]>>(
  args: string[],
  options: O,
): ReturnType<typeof parseArgs<{ args: string[]; options: O; allowPositionals: true; strict: true }>> {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function int(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new UsageError(`--${flag} must be an integer, got '${value}'`);
  return n;
}

function num(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(`--${flag} must be a number, got '${value}'`);
  return n;
}

function onOff(flag: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === "on" || value === "true") return true;
  if (value === "off" || value === "false") return false;
  throw new UsageError(`--${flag} must be on or off, got '${value}'`);
}

/** --api-key-file, --admin-key-file: one key per line; blank lines and lines starting with # are skipped. */
function keysFromFile(flag: string, file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new UsageError(`--${flag} ${file}: ${(err as Error).message}`);
  }
  const keys = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  if (keys.length === 0) throw new UsageError(`--${flag} ${file} holds no key`);
  return keys;
}

type ServeValues = ReturnType<typeof parse<typeof SERVE_OPTIONS>>["values"];

/** The flags that shape the config, from parsed serve/check options. */
export function serveFlags(v: ServeValues): ServeFlags {
  const flags: ServeFlags = {};
  const set = <K extends keyof ServeFlags>(k: K, value: ServeFlags[K] | undefined) => {
    if (value !== undefined) flags[k] = value;
  };
  set("host", v.host);
  set("port", int("port", v.port));
  set("grpcPort", int("grpc-port", v["grpc-port"]));
  set("name", v.name);
  set("backend", v.backend);
  set("threads", int("threads", v.threads));
  set("maxBatchRows", int("max-batch-rows", v["max-batch-rows"]));
  set("maxBodyBytes", int("max-body-bytes", v["max-body-bytes"]));
  set("sha256", v.sha256);
  set("golden", v.golden);
  const keys = [
    ...(v["api-key"] ?? []),
    ...(v["api-key-file"] ?? []).flatMap((f) => keysFromFile("api-key-file", f)),
  ];
  set("apiKeys", keys.length ? keys : undefined);
  const admin = [
    ...(v["admin-key"] ?? []),
    ...(v["admin-key-file"] ?? []).flatMap((f) => keysFromFile("admin-key-file", f)),
  ];
  set("adminKeys", admin.length ? admin : undefined);
  set("keys", v.keys);
  set("allowedHosts", v["allowed-host"]);
  set("allowedOrigins", v["allowed-origin"]);
  set("repository", v.repository);
  set("repositoryPollMs", int("repository-poll-ms", v["repository-poll-ms"]));
  set("maxConnections", int("max-connections", v["max-connections"]));
  set("logLevel", v["log-level"]);
  set("drainTimeoutMs", int("drain-timeout-ms", v["drain-timeout-ms"]));
  set("processes", int("processes", v.processes));
  set("allowOversubscription", v["allow-oversubscription"]);
  set("sharedMemory", v["shared-memory"]);
  const role = v.role;
  if (role !== undefined && role !== "all" && role !== "api" && role !== "runner") {
    throw new UsageError(`--role must be all, api or runner, got '${role}'`);
  }
  set("role", role);
  set("runners", v.runner);
  set("instanceId", v["instance-id"]);
  set("maxQueueRows", int("max-queue-rows", v["max-queue-rows"]));
  set("timeoutMs", int("timeout-ms", v["timeout-ms"]));
  set("placement", v.placement);
  set("device", v.device);
  set("maxRssMb", int("max-rss-mb", v["max-rss-mb"]));
  set("batching", onOff("batching", v.batching));
  set("batchMaxRows", int("batch-max-rows", v["batch-max-rows"]));
  set("batchMaxDelayMs", num("batch-max-delay-ms", v["batch-max-delay-ms"]));
  const mode = v["batch-mode"];
  if (mode !== undefined && mode !== "adaptive" && mode !== "classic") {
    throw new UsageError(`--batch-mode must be adaptive or classic, got '${mode}'`);
  }
  set("batchAdaptive", mode === undefined ? undefined : mode === "adaptive");
  set("inlineMaxMs", num("inline-max-ms", v["inline-max-ms"]));
  return flags;
}
