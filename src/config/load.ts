// Builds the frozen Config from a YAML file or a single model path plus CLI flags. Every
// problem is collected and reported at once, with the file and key, before anything listens.
import { existsSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, dirname, extname, resolve } from "node:path";
import { parse as parseYaml, YAMLParseError } from "yaml";
import type { z } from "zod";
import type { ModelManifest } from "../golden.js";
import { threadBudget } from "../runner/threads.js";
import {
  type Config,
  type ConfigInput,
  configSchema,
  type ModelConfig,
  type ModelConfigInput,
} from "./schema.js";

/** A configuration that cannot be served; `problems` lists each as "file: key: what is wrong". */
export class ConfigError extends Error {
  readonly code = "MP_ERR_CONFIG_INVALID";
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join("\n  - ")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export interface ServeFlags {
  host?: string;
  port?: number;
  name?: string;
  backend?: string;
  threads?: number;
  maxBatchRows?: number;
  maxBodyBytes?: number;
  sha256?: string;
  golden?: string;
  apiKeys?: string[];
  logLevel?: string;
  drainTimeoutMs?: number;
  processes?: number;
  allowOversubscription?: boolean;
  maxQueueRows?: number;
  timeoutMs?: number;
  /** Single model only. */
  placement?: string;
  device?: string;
  maxRssMb?: number;
  batching?: boolean;
  batchMaxRows?: number;
  batchMaxDelayMs?: number;
  batchAdaptive?: boolean;
}

/** Flags that describe the one model given on the command line. */
const SINGLE_MODEL_FLAGS = [
  "name",
  "backend",
  "threads",
  "sha256",
  "golden",
  "placement",
  "device",
  "maxRssMb",
  "batching",
  "batchMaxRows",
  "batchMaxDelayMs",
  "batchAdaptive",
] as const;

export interface LoadConfigOptions {
  /** YAML config file. */
  file?: string;
  /** A single model to serve (file or handler module). */
  modelPath?: string;
  flags?: ServeFlags;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Cores for the thread budget; default os.availableParallelism(). */
  cores?: number;
}

/** Picks the backend from a path: .onnx → onnx; .ts/.js/.mjs module → custom. */
export function backendForPath(path: string): "onnx" | "custom" | undefined {
  const ext = extname(path).toLowerCase();
  if (ext === ".onnx") return "onnx";
  if ([".ts", ".mts", ".js", ".mjs", ".cjs", ".cts"].includes(ext)) return "custom";
  return undefined;
}

function modelBase(path: string): string {
  return basename(path, extname(path));
}

function formatKey(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path)
    out += typeof part === "number" ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out || "(top level)";
}

function readYaml(file: string, problems: string[]): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    problems.push(
      `${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
    return undefined;
  }
  try {
    return parseYaml(text) ?? {};
  } catch (err) {
    const where = err instanceof YAMLParseError && err.linePos ? ` at line ${err.linePos[0].line}` : "";
    problems.push(`${file}${where}: not valid YAML: ${(err as Error).message.split("\n")[0]}`);
    return undefined;
  }
}

function singleModelInput(modelPath: string, flags: ServeFlags, cwd: string): ModelConfigInput {
  const path = resolve(cwd, modelPath);
  const model: ModelConfigInput = {
    name: flags.name ?? modelBase(path),
    backend: (flags.backend ?? backendForPath(path) ?? "onnx") as ModelConfigInput["backend"],
    path,
  };
  if (flags.threads !== undefined) model.threads = flags.threads;
  if (flags.sha256 !== undefined) model.sha256 = flags.sha256;
  if (flags.golden !== undefined) model.golden = resolve(cwd, flags.golden);
  if (flags.placement !== undefined) model.placement = flags.placement as ModelConfigInput["placement"];
  if (flags.device !== undefined) model.device = flags.device as ModelConfigInput["device"];
  if (flags.maxRssMb !== undefined) model.maxRssMb = flags.maxRssMb;
  const batching: Record<string, unknown> = {};
  if (flags.batching !== undefined) batching.enabled = flags.batching;
  if (flags.batchMaxRows !== undefined) batching.maxBatchRows = flags.batchMaxRows;
  if (flags.batchMaxDelayMs !== undefined) batching.maxDelayMs = flags.batchMaxDelayMs;
  if (flags.batchAdaptive !== undefined) batching.adaptive = flags.batchAdaptive;
  if (Object.keys(batching).length) model.batching = batching as ModelConfigInput["batching"];
  return model;
}

function applyFlags(raw: Record<string, unknown>, flags: ServeFlags, env: NodeJS.ProcessEnv): void {
  raw.server ??= {};
  const server = raw.server as Record<string, unknown>;
  if (flags.host !== undefined) server.host = flags.host;
  if (flags.port !== undefined) server.port = flags.port;
  if (flags.logLevel !== undefined) server.logLevel = flags.logLevel;
  if (flags.drainTimeoutMs !== undefined) server.drainTimeoutMs = flags.drainTimeoutMs;
  if (flags.processes !== undefined) server.processes = flags.processes;
  if (flags.allowOversubscription !== undefined) server.allowOversubscription = flags.allowOversubscription;
  const keys = [...((server.apiKeys as string[] | undefined) ?? []), ...(flags.apiKeys ?? [])];
  for (const k of (env.MODELPORT_API_KEYS ?? "").split(",")) if (k.trim()) keys.push(k.trim());
  if (keys.length) server.apiKeys = keys;
  raw.limits ??= {};
  const limits = raw.limits as Record<string, unknown>;
  if (flags.maxBatchRows !== undefined) limits.maxBatchRows = flags.maxBatchRows;
  if (flags.maxBodyBytes !== undefined) limits.maxBodyBytes = flags.maxBodyBytes;
  if (flags.maxQueueRows !== undefined) limits.maxQueueRows = flags.maxQueueRows;
  if (flags.timeoutMs !== undefined) limits.timeoutMs = flags.timeoutMs;
}

function readManifest(file: string, problems: string[], where: string): ModelManifest | undefined {
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as ModelManifest;
    if (typeof m.sha256 !== "string" || !/^[0-9a-f]{64}$/i.test(m.sha256)) {
      problems.push(`${where}: manifest ${file} has no valid sha256`);
      return undefined;
    }
    return m;
  } catch (err) {
    problems.push(`${where}: cannot read manifest ${file}: ${(err as Error).message}`);
    return undefined;
  }
}

function resolveModel(
  m: z.output<typeof configSchema>["models"][number],
  index: number,
  baseDir: string,
  defaults: z.output<typeof configSchema>["limits"],
  source: string,
  problems: string[],
): ModelConfig {
  const where = `${source}: models[${index}]`;
  const path = resolve(baseDir, m.path);
  if (!existsSync(path)) problems.push(`${where}.path: ${path} does not exist`);
  else if (!statSync(path).isFile()) problems.push(`${where}.path: ${path} is not a file`);
  const stem = resolve(dirname(path), modelBase(path));

  let sha256 = m.sha256;
  let sha256Source = sha256 ? `${source} models[${index}].sha256` : undefined;
  const manifestPath = `${stem}.manifest.json`;
  if (!sha256 && existsSync(manifestPath)) {
    const manifest = readManifest(manifestPath, problems, where);
    if (manifest) {
      sha256 = manifest.sha256.toLowerCase();
      sha256Source = manifestPath;
    }
  }

  let golden: string | undefined;
  if (m.golden) {
    golden = resolve(baseDir, m.golden);
    if (!existsSync(golden)) problems.push(`${where}.golden: ${golden} does not exist`);
  } else if (existsSync(`${stem}.golden.json`)) {
    golden = `${stem}.golden.json`;
  }

  return Object.freeze({
    name: m.name,
    backend: m.backend,
    path,
    version: m.version,
    ...(sha256 ? { sha256, sha256Source } : {}),
    ...(golden ? { golden } : {}),
    tolerance: m.tolerance,
    threads: m.threads,
    limits: Object.freeze({ ...defaults, ...m.limits }),
    batching: Object.freeze({ ...m.batching }),
    placement: m.placement,
    ...(m.maxRssMb ? { maxRssMb: m.maxRssMb } : {}),
    device: m.device,
    options: Object.freeze({ ...m.options }),
    ...(m.description ? { description: m.description } : {}),
  });
}

/**
 * Loads and validates the configuration.
 * @returns a deeply frozen Config.
 * @throws ConfigError listing every problem found.
 */
export function loadConfig(opts: LoadConfigOptions): Config {
  const cwd = opts.cwd ?? process.cwd();
  const flags = opts.flags ?? {};
  const env = opts.env ?? process.env;
  const problems: string[] = [];
  let raw: Record<string, unknown> = {};
  let source = "command line";
  let baseDir = cwd;

  if (opts.file) {
    const file = resolve(cwd, opts.file);
    source = file;
    baseDir = dirname(file);
    const parsed = readYaml(file, problems);
    if (parsed === undefined) throw new ConfigError(problems);
    if (typeof parsed !== "object" || Array.isArray(parsed)) {
      throw new ConfigError([`${file}: the top level must be a mapping with server, limits and models`]);
    }
    raw = parsed as Record<string, unknown>;
  }
  if (opts.modelPath) {
    const models = Array.isArray(raw.models) ? (raw.models as unknown[]) : [];
    raw.models = [...models, singleModelInput(opts.modelPath, flags, cwd)];
  } else if (opts.file) {
    const misplaced = SINGLE_MODEL_FLAGS.filter((f) => flags[f] !== undefined);
    if (misplaced.length) {
      problems.push(
        `command line: ${misplaced.join(", ")} describe a single model path; with -c set them in the file`,
      );
    }
  }
  if (!opts.file && !opts.modelPath) {
    throw new ConfigError([
      "command line: give a model path (modelport serve model.onnx) or a config file (-c modelport.yaml)",
    ]);
  }
  applyFlags(raw, flags, env);

  const result = configSchema.safeParse(raw as ConfigInput);
  if (!result.success) {
    for (const issue of result.error.issues)
      problems.push(`${source}: ${formatKey(issue.path)}: ${issue.message}`);
    throw new ConfigError(problems);
  }
  const parsed = result.data;
  const models = parsed.models.map((m, i) => resolveModel(m, i, baseDir, parsed.limits, source, problems));
  const seen = new Map<string, number>();
  models.forEach((m, i) => {
    const first = seen.get(m.name);
    if (first !== undefined) {
      problems.push(
        `${source}: models[${i}].name: '${m.name}' is already used by models[${first}]; names must be unique`,
      );
    } else seen.set(m.name, i);
  });
  const budget = threadBudget({ server: parsed.server, models }, opts.cores ?? availableParallelism());
  for (const p of budget.problems) problems.push(`${source}: thread budget: ${p}`);
  if (problems.length) throw new ConfigError(problems);

  return Object.freeze({
    server: Object.freeze({ ...parsed.server, apiKeys: Object.freeze([...parsed.server.apiKeys]) }),
    limits: Object.freeze({ ...parsed.limits }),
    jobs: Object.freeze({ ...parsed.jobs }),
    models: Object.freeze(models),
    ...(opts.file ? { source } : {}),
  });
}
