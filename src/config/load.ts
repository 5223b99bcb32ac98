// Builds the frozen Config from a YAML file or a single model path plus CLI flags. Every
// problem is collected and reported at once, with the file and key, before anything listens.
import { existsSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import { basename, dirname, extname, resolve } from "node:path";
import { parse as parseYaml, YAMLParseError } from "yaml";
import type { z } from "zod";
import { readKeyFile } from "../tenants/key-file.js";
import { MAX_CONFIG_DEPTH, yamlDepthExceeds } from "../yaml-depth.js";
import { backendForPath, isLanguageBackend } from "./backends.js";
import { resolveLanguageModel } from "./language-models.js";
import { goldenFile, manifestSha256 } from "./model-files.js";
import {
  type CaptureConfig,
  type Config,
  type ConfigInput,
  configSchema,
  type LanguageModelConfig,
  type ModelConfig,
  type ModelConfigInput,
  withBatchDefaults,
} from "./schema.js";
import { threadBudget } from "./threads.js";

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
  grpcPort?: number;
  name?: string;
  backend?: string;
  threads?: number;
  maxBatchRows?: number;
  maxBodyBytes?: number;
  sha256?: string;
  golden?: string;
  apiKeys?: string[];
  /** The key file (server.keys). */
  keys?: string;
  /** server.allowedHosts: replaces the file's list. */
  allowedHosts?: string[];
  /** server.allowedOrigins: replaces the file's list. */
  allowedOrigins?: string[];
  logLevel?: string;
  drainTimeoutMs?: number;
  maxConnections?: number;
  processes?: number;
  allowOversubscription?: boolean;
  role?: string;
  runners?: string[];
  instanceId?: string;
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
  inlineMaxMs?: number;
  adminKeys?: string[];
  /** server.sharedMemory.enabled. */
  sharedMemory?: boolean;
  /** A model repository folder (docs/Models-over-time.md). */
  repository?: string;
  /** Poll the repository this often (poll mode). */
  repositoryPollMs?: number;
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
  "inlineMaxMs",
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

function modelBase(path: string): string {
  return basename(path, extname(path));
}

function formatKey(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path)
    out += typeof part === "number" ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out || "(top level)";
}

export function readYaml(file: string, problems: string[]): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    problems.push(
      `${file}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
    return undefined;
  }
  if (yamlDepthExceeds(text, MAX_CONFIG_DEPTH)) {
    problems.push(`${file}: nests mappings and lists deeper than ${MAX_CONFIG_DEPTH} levels`);
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
  if (flags.inlineMaxMs !== undefined) batching.inlineMaxMs = flags.inlineMaxMs;
  if (Object.keys(batching).length) model.batching = batching as ModelConfigInput["batching"];
  return model;
}

/**
 * The mapping `raw[key]` to apply flags to: created when absent; undefined when the file gave it as
 * something else (a number, a list), which the schema then reports with its key. Writing into it
 * would throw a TypeError instead of listing the problem.
 */
function section(raw: Record<string, unknown>, key: string): Record<string, unknown> | undefined {
  raw[key] ??= {};
  const value = raw[key];
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function applyFlags(raw: Record<string, unknown>, flags: ServeFlags, env: NodeJS.ProcessEnv): void {
  const server = section(raw, "server");
  if (server) applyServerFlags(server, flags, env);
  const limits = section(raw, "limits");
  if (!limits) return;
  if (flags.maxBatchRows !== undefined) limits.maxBatchRows = flags.maxBatchRows;
  if (flags.maxBodyBytes !== undefined) limits.maxBodyBytes = flags.maxBodyBytes;
  if (flags.maxQueueRows !== undefined) limits.maxQueueRows = flags.maxQueueRows;
  if (flags.timeoutMs !== undefined) limits.timeoutMs = flags.timeoutMs;
}

/**
 * Keys from the file, the flags and a comma-separated environment variable add up. A file's value
 * that is not a list is left for the schema to report.
 */
function addKeys(
  server: Record<string, unknown>,
  key: "apiKeys" | "adminKeys",
  fromFlags: string[] | undefined,
  fromEnv: string | undefined,
): void {
  const inFile = server[key] === undefined ? [] : Array.isArray(server[key]) ? server[key] : undefined;
  if (!inFile) return;
  const keys = [...inFile, ...(fromFlags ?? [])];
  for (const k of (fromEnv ?? "").split(",")) if (k.trim()) keys.push(k.trim());
  if (keys.length) server[key] = keys;
}

function applyServerFlags(server: Record<string, unknown>, flags: ServeFlags, env: NodeJS.ProcessEnv): void {
  if (flags.host !== undefined) server.host = flags.host;
  if (flags.port !== undefined) server.port = flags.port;
  if (flags.grpcPort !== undefined) server.grpcPort = flags.grpcPort;
  if (flags.logLevel !== undefined) server.logLevel = flags.logLevel;
  if (flags.drainTimeoutMs !== undefined) server.drainTimeoutMs = flags.drainTimeoutMs;
  if (flags.processes !== undefined) server.processes = flags.processes;
  if (flags.maxConnections !== undefined)
    server.connections = { ...(server.connections as object), maxConnections: flags.maxConnections };
  if (flags.allowOversubscription !== undefined) server.allowOversubscription = flags.allowOversubscription;
  if (flags.sharedMemory !== undefined)
    server.sharedMemory = { ...(server.sharedMemory as object), enabled: flags.sharedMemory };
  addKeys(server, "apiKeys", flags.apiKeys, env.MODELPORT_API_KEYS);
  if (flags.keys !== undefined) server.keys = flags.keys;
  // A command line names the whole list, as --runner does.
  if (flags.allowedHosts !== undefined) server.allowedHosts = flags.allowedHosts;
  if (flags.allowedOrigins !== undefined) server.allowedOrigins = flags.allowedOrigins;
  addKeys(server, "adminKeys", flags.adminKeys, env.MODELPORT_ADMIN_KEYS);
  if (flags.role !== undefined) server.role = flags.role;
  if (flags.instanceId !== undefined) server.instanceId = flags.instanceId;
  // --runner replaces the file's list (a command line names the whole set); the env adds to it; a
  // file's value that is not a list is left for the schema to report.
  const fileRunners =
    server.runners === undefined ? [] : Array.isArray(server.runners) ? server.runners : undefined;
  const runners = flags.runners ?? fileRunners;
  const fromEnv = (env.MODELPORT_RUNNERS ?? "").split(",").map((r) => r.trim());
  const allRunners = [...(runners ?? []), ...fromEnv.filter((r) => r !== "")];
  if (allRunners.length && runners) server.runners = allRunners;
  if (env.MODELPORT_INSTANCE_ID && server.instanceId === undefined)
    server.instanceId = env.MODELPORT_INSTANCE_ID;
}

/**
 * A file entry without `backend` gets the one its path means (backends.ts: the same resolution as
 * `modelport serve PATH`), its path taken relative to the config file; onnx when the path says
 * nothing.
 */
function inferBackends(raw: Record<string, unknown>, baseDir: string): void {
  if (!Array.isArray(raw.models)) return;
  for (const m of raw.models as unknown[]) {
    if (typeof m !== "object" || m === null) continue;
    const entry = m as Record<string, unknown>;
    if (entry.backend !== undefined || typeof entry.path !== "string") continue;
    const backend = backendForPath(resolve(baseDir, entry.path));
    if (backend) entry.backend = backend;
  }
}

/** What resolving a model entry needs of the rest of the configuration. */
export interface EntryContext {
  /** Where relative paths start (the config file's folder). */
  baseDir: string;
  limits: z.output<typeof configSchema>["limits"];
  server: Pick<Config["server"], "role" | "pricePerHour">;
}

/**
 * One parsed `models` entry (or repository version) resolved into what its model is built from:
 * absolute paths, sha256 from the config or a manifest, the golden file, limits and prices.
 * `where` prefixes each problem (`file: models[2]`).
 */
export function resolveEntry(
  m: ParsedModel,
  where: string,
  ctx: EntryContext,
  problems: string[],
): ModelConfig | LanguageModelConfig {
  if (isLanguageBackend(m.backend)) {
    return resolveLanguageModel(
      m as ParsedModel & { backend: LanguageModelConfig["backend"] },
      where,
      ctx.baseDir,
      ctx.limits,
      problems,
      ctx.server.pricePerHour,
      ctx.server.role !== "api",
    );
  }
  if (m.llm !== undefined)
    problems.push(`${where}.llm: applies only to backends llama-cpp, transformers and upstream`);
  for (const key of ["pricePerMillionInputTokens", "pricePerMillionOutputTokens"] as const) {
    if (m[key] !== undefined)
      problems.push(
        `${where}.${key}: applies only to language models (a tensor model costs machine time, pricePerHour)`,
      );
  }
  const model = resolveModel(m, where, ctx.baseDir, ctx.limits, problems, ctx.server.role);
  // Machine-hour price for cost per request: the model's own, else the server's default.
  return Object.freeze({
    ...model,
    pricePerHour: m.pricePerHour ?? ctx.server.pricePerHour,
    ...(m.batchPriceFactor !== undefined ? { batchPriceFactor: m.batchPriceFactor } : {}),
  });
}

type ParsedModel = z.output<typeof configSchema>["models"][number];

function resolveModel(
  m: ParsedModel,
  where: string,
  baseDir: string,
  defaults: z.output<typeof configSchema>["limits"],
  problems: string[],
  role: Config["server"]["role"],
): ModelConfig {
  const path = resolve(baseDir, m.path);
  // The API tier loads no weights: its machine need not hold the model files.
  const checkFiles = role !== "api";
  if (checkFiles && !existsSync(path)) problems.push(`${where}.path: ${path} does not exist`);
  else if (checkFiles && !statSync(path).isFile()) problems.push(`${where}.path: ${path} is not a file`);
  const stem = resolve(dirname(path), modelBase(path));

  let sha256 = m.sha256;
  let sha256Source = sha256 ? `${where}.sha256` : undefined;
  const manifestPath = `${stem}.manifest.json`;
  if (!sha256 && existsSync(manifestPath)) {
    sha256 = manifestSha256(manifestPath, where, problems);
    if (sha256) sha256Source = manifestPath;
  }
  const golden = goldenFile(m.golden, baseDir, stem, where, problems, checkFiles);

  return Object.freeze({
    name: m.name,
    backend: m.backend as ModelConfig["backend"],
    path,
    version: m.version,
    ...(sha256 ? { sha256, sha256Source } : {}),
    ...(golden ? { golden } : {}),
    tolerance: m.tolerance,
    threads: m.threads,
    limits: Object.freeze({ ...defaults, ...m.limits }),
    batching: withBatchDefaults(m.batching, "tensor"),
    placement: m.placement,
    ...(m.maxRssMb ? { maxRssMb: m.maxRssMb } : {}),
    device: m.device,
    options: Object.freeze({ ...m.options }),
    ...(m.load === "lazy" ? { load: "lazy" as const } : {}),
    ...(m.idleUnloadMs !== undefined ? { idleUnloadMs: m.idleUnloadMs } : {}),
    ...(m.description ? { description: m.description } : {}),
    ...(m.capture ? { capture: frozenCapture(m.capture) } : {}),
  });
}

/** A model's capture settings, frozen with their redaction list. */
function frozenCapture(c: CaptureConfig): Readonly<CaptureConfig> {
  return Object.freeze({ ...c, redact: Object.freeze([...c.redact]) as string[] });
}

/**
 * For a config the schema refused: the model files it names that do not exist, read from the raw
 * entries (as resolveModel checks them once the schema passes), so one run lists every problem.
 */
function missingModelFiles(
  raw: Record<string, unknown>,
  source: string,
  baseDir: string,
  problems: string[],
): void {
  const server = raw.server as { role?: unknown } | undefined;
  if (server?.role === "api" || !Array.isArray(raw.models)) return;
  (raw.models as unknown[]).forEach((entry, i) => {
    const m = entry as { path?: unknown; backend?: unknown; golden?: unknown } | null;
    if (!m || typeof m !== "object" || m.backend === "upstream") return;
    for (const key of ["path", "golden"] as const) {
      const value = m[key];
      if (typeof value !== "string" || value === "" || /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) continue;
      const path = resolve(baseDir, value);
      if (!existsSync(path)) problems.push(`${source}: models[${i}].${key}: ${path} does not exist`);
    }
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
  // The API tier needs none of them: it serves what its runners report.
  if (!opts.file && !opts.modelPath && flags.repository === undefined && flags.role !== "api") {
    throw new ConfigError([
      "command line: give a model path (modelport serve model.onnx), a config file (-c modelport.yaml) or a repository (--repository DIR)",
    ]);
  }
  if (flags.repository !== undefined || flags.repositoryPollMs !== undefined) {
    const repo = section(raw, "repository");
    if (repo) {
      // From the command line, the folder is relative to the working directory.
      if (flags.repository !== undefined) repo.dir = resolve(cwd, flags.repository);
      if (flags.repositoryPollMs !== undefined) {
        repo.mode = "poll";
        repo.pollMs = flags.repositoryPollMs;
      }
    }
  }
  applyFlags(raw, flags, env);
  inferBackends(raw, baseDir);
  // An upstream model has a URL, not a file: its `path` may be left out (it is the URL then).
  if (Array.isArray(raw.models)) {
    for (const m of raw.models as Record<string, unknown>[]) {
      const url = (m?.upstream as { url?: unknown } | undefined)?.url;
      if (m?.backend === "upstream" && m.path === undefined && typeof url === "string") m.path = url;
    }
  }

  const result = configSchema.safeParse(raw as ConfigInput);
  if (!result.success) {
    for (const issue of result.error.issues)
      problems.push(`${source}: ${formatKey(issue.path)}: ${issue.message}`);
    // Every problem at once: a schema error elsewhere must not hide a model file that is missing.
    missingModelFiles(raw, source, baseDir, problems);
    throw new ConfigError(problems);
  }
  const parsed = result.data;
  const role = parsed.server.role;
  // Tensor models (onnx, custom) and language models (llama-cpp, transformers, upstream) are
  // built differently, so they are kept in two lists.
  const ctx: EntryContext = { baseDir, limits: parsed.limits, server: parsed.server };
  const models: ModelConfig[] = [];
  const languageModels: LanguageModelConfig[] = [];
  parsed.models.forEach((m, i) => {
    const c = resolveEntry(m, `${source}: models[${i}]`, ctx, problems);
    if (isLanguageBackend(c.backend)) languageModels.push(c as LanguageModelConfig);
    else models.push(c as ModelConfig);
  });
  if (role === "api" && parsed.server.runners.length === 0) {
    problems.push(
      `${source}: server.runners: role api forwards to runners; list their URLs (server.runners, --runner URL or MODELPORT_RUNNERS)`,
    );
  }
  for (const [i, r] of parsed.server.runners.entries()) {
    if (!/^(dns\+)?https?:\/\/[^/\s]+\/?$/.test(r)) {
      problems.push(
        `${source}: server.runners[${i}]: '${r}' is not a base URL like http://runner:8080 or dns+http://runners:8080`,
      );
    }
  }
  const seen = new Map<string, number>();
  parsed.models.forEach((m, i) => {
    const first = seen.get(m.name);
    if (first !== undefined) {
      problems.push(
        `${source}: models[${i}].name: '${m.name}' is already used by models[${first}]; names must be unique`,
      );
    } else seen.set(m.name, i);
  });
  // The API tier runs no models, so their threads do not count against its cores.
  if (role !== "api") {
    const budget = threadBudget(
      { server: parsed.server, models, languageModels },
      opts.cores ?? availableParallelism(),
    );
    for (const p of budget.problems) problems.push(`${source}: thread budget: ${p}`);
  }
  // The API tier reads no repository (a config file shared with the runners may name one): it
  // serves the models its runners report.
  const repository =
    parsed.repository && role !== "api"
      ? Object.freeze({ ...parsed.repository, dir: resolve(baseDir, parsed.repository.dir) })
      : undefined;
  if (repository) {
    if (!existsSync(repository.dir))
      problems.push(`${source}: repository.dir: ${repository.dir} does not exist`);
    else if (!statSync(repository.dir).isDirectory())
      problems.push(`${source}: repository.dir: ${repository.dir} is not a folder`);
  }
  if (role === "api" && flags.repository !== undefined) {
    problems.push(
      "command line: --repository: the API tier loads no models; give the repository to the runners, and the API tier serves what they report",
    );
  }
  // The key file: from the command line relative to the working directory, from a file to its folder.
  const keys =
    parsed.server.keys === undefined
      ? undefined
      : resolve(flags.keys !== undefined ? cwd : baseDir, parsed.server.keys);
  if (keys !== undefined) {
    try {
      readKeyFile(keys);
    } catch (err) {
      problems.push(`${source}: server.keys: ${(err as Error).message}`);
    }
  }
  // Payload capture needs somewhere to write (docs/Capture.md).
  if (!parsed.server.capture) {
    parsed.models.forEach((m, i) => {
      if (m.capture)
        problems.push(
          `${source}: models[${i}].capture: needs a destination; set server.capture.dir (JSONL files) or server.capture.s3`,
        );
    });
  }
  if (problems.length) throw new ConfigError(problems);

  return Object.freeze({
    server: Object.freeze({
      ...parsed.server,
      ...(keys !== undefined ? { keys } : {}),
      apiKeys: Object.freeze([...parsed.server.apiKeys]),
      adminKeys: Object.freeze([...parsed.server.adminKeys]),
      // The capture folder, like the models, is relative to the config file.
      ...(parsed.server.capture
        ? {
            capture: Object.freeze({
              ...parsed.server.capture,
              ...(parsed.server.capture.dir !== undefined
                ? { dir: resolve(baseDir, parsed.server.capture.dir) }
                : {}),
            }),
          }
        : {}),
    }),
    limits: Object.freeze({ ...parsed.limits }),
    jobs: Object.freeze({ ...parsed.jobs }),
    models: Object.freeze(models),
    ...(languageModels.length ? { languageModels: Object.freeze(languageModels) } : {}),
    ...(repository ? { repository } : {}),
    ...(opts.file ? { source } : {}),
  });
}
