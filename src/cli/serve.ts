// `modelport serve`: listen at once (so /livez answers and /readyz says "loading"), load and
// golden-check the models, and drain gracefully on SIGTERM or SIGINT.
import cluster from "node:cluster";
import { availableParallelism } from "node:os";
import { ConfigError, loadConfig } from "../config/load.js";
import { threadBudget } from "../config/threads.js";
import { applyHeapGrowth } from "../heap-growth.js";
import { IdleCoresWatch, type RunnerLoad } from "../lifecycle/idle-cores.js";
import { applyMallocThresholds } from "../malloc-thresholds.js";
import { buildApp, type ModelportApp } from "../server/app.js";
import { parse, SERVE_OPTIONS, serveFlags, UsageError } from "./args.js";
import { runPrimary } from "./cluster.js";
import { CLOSE_MARGIN_MS, installLastResort } from "./last-resort.js";
import { createLogger } from "./logger.js";

export const SERVE_HELP = `Usage: modelport serve [MODEL] [options]
       modelport serve --repository DIR [options]
       modelport serve --role api --runner URL... [options]

Serve one model file (MODEL: .onnx, or a .ts/.js custom handler) or several (-c FILE).
MODEL may also be a Hugging Face model folder (config.json, tokenizer.json, onnx/model.onnx):
it is served as an embeddings model (backend transformers) on POST /v1/embeddings.
A model served from a file is named after the file's base name unless --name is given.
Beside MODEL, NAME.manifest.json (sha256) and NAME.golden.json are used when present.
--repository DIR serves DIR/NAME/VERSION/ folders; versions load, swap and unload while the
server runs (docs/Models-over-time.md).

Options:
  -c, --config FILE        YAML config with server, limits and models (docs/Config.md)
      --repository DIR     serve a model repository (beside -c or MODEL, or alone)
      --repository-poll-ms N  rescan the repository every N ms: new, changed and removed versions
                           load, swap and unload (default: explicit, only the management API)
      --host HOST          address to listen on (default 127.0.0.1)
  -p, --port PORT          port to listen on (default 8080; 0 picks a free one)
      --grpc-port PORT     also serve the Open Inference Protocol over gRPC on PORT (0 picks a
                           free one; default: no gRPC) (docs/API.md#grpc)
      --name NAME          model name (single model)
      --backend NAME       onnx | custom | llama-cpp | transformers (default: from the file
                           extension; a folder with config.json + tokenizer.json: transformers)
      --threads N          intra-op threads for the model (default 1)
      --sha256 HEX         expected sha256 of the model file (single model)
      --golden FILE        golden file (single model)
      --max-batch-rows N   most rows per request (default 1024)
      --max-body-bytes N   largest request body (default 10485760)
      --api-key-file FILE  require Authorization: Bearer KEY for a KEY on a line of FILE (blank
                           lines and # comments skipped; repeatable; also MODELPORT_API_KEYS=k1,k2)
      --api-key KEY        as above with KEY itself (repeatable); other users of the machine can
                           read a command line, so prefer --api-key-file or MODELPORT_API_KEYS
      --admin-key-file FILE  keys that may also load, unload, promote and roll back models
                           (also MODELPORT_ADMIN_KEYS; --admin-key KEY); without any, only loopback
                           callers of a server without API keys may
      --keys FILE          the key file: named keys with roles, models and limits, re-read on
                           change and SIGHUP; make keys with \`modelport keys create NAME\`
                           (docs/Multi-tenant.md)
      --allowed-host NAME  a host name this server answers to besides IP addresses and localhost
                           (repeatable; .example.com takes its subdomains; * any): a server without
                           keys refuses other Host headers, which only DNS rebinding sends
                           (docs/Multi-tenant.md#browsers-host-and-origin)
      --allowed-origin ORIGIN  a web origin (https://app.example.com) whose pages may send
                           state-changing requests and open WebSockets (repeatable; * any)
      --max-connections N  open client connections; more get 503 and are closed (default 4096;
                           timeouts: server.connections in the config file)
      --log-level LEVEL    fatal|error|warn|info|debug|trace|silent (default info)
      --log-format FORMAT  auto|json|pretty (default auto: pretty on a terminal)
      --drain-timeout-ms N how long SIGTERM waits for in-flight requests (default 10000)
      --processes N        HTTP front processes, each with its own copy of the models (default 1)
      --allow-oversubscription  accept a layout whose multi-threaded models oversubscribe the cores
      --shared-memory      let clients on this host send and receive tensors through registered
                           shared memory regions (/dev/shm; Triton's system shared-memory
                           extension; trusted clients only) (docs/API.md#shared-memory)
      --role ROLE          all (default: HTTP and models in one process) | api (HTTP, validation,
                           auth, jobs API; loads no weights, forwards to runners, and serves every
                           model and version they report: no MODEL or -c needed) | runner (loads
                           the models, answers the API tier, executes jobs) (docs/Deploy.md)
      --runner URL         role api: a runner's base URL, e.g. http://10.0.0.5:8080 (repeatable;
                           also MODELPORT_RUNNERS); dns+http://NAME:PORT expands to every address
                           of NAME (a Kubernetes headless Service)
      --instance-id ID     this process's name in logs, metrics and X-Modelport-Instance
                           (default HOST:PID; also MODELPORT_INSTANCE_ID)
      --max-queue-rows N   rows that may wait per model before 503 + Retry-After (default 4096)
      --timeout-ms N       default request deadline; X-Request-Timeout-Ms overrides (default 30000)
      --placement WHERE    worker (thread, default) | process (supervised child process)
      --max-rss-mb N       process placement: recycle the runner above this RSS
      --device DEVICE      cpu (default) | cuda
      --batching on|off    join concurrent requests (default on when the model has a batch dim)
      --batch-max-rows N   largest batch (default 256; embeddings 64)
      --batch-max-delay-ms N  longest a request waits for company (default 2)
      --batch-mode MODE    adaptive (default) | classic (wait for a full batch or the max delay)
      --inline-max-ms N    ONNX: a request to an idle model predicted to take at most N ms runs
                           on a copy in the server's thread, without a thread hop (default 1; 0 off)
  -h, --help               show this help

Environment: MODELPORT_HEAP_GROWING_PERCENT=N sets V8's heap growing factor (default 400; 0 keeps
V8's own), which paces full collections under large tensors; MODELPORT_RAISE_MALLOC_THRESHOLDS=0
leaves glibc's malloc thresholds as they are (default 1: raised at start so that tensors of up to
32 MiB reuse memory instead of taking fresh pages). See docs/Performance-tuning.md.
`;

export async function serve(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, SERVE_OPTIONS);
  if (values.help) {
    process.stdout.write(SERVE_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError("serve takes one model path; use -c for several models");
  try {
    applyHeapGrowth();
    applyMallocThresholds();
  } catch (err) {
    process.stderr.write(`modelport: ${(err as Error).message}\nSee docs/Performance-tuning.md.\n`);
    return 2;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ file: values.config, modelPath: positionals[0], flags: serveFlags(values) });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`modelport: ${err.code}: ${err.message}\nSee docs/Config.md.\n`);
      return 2;
    }
    throw err;
  }
  const format = (values["log-format"] ?? "auto") as "auto" | "json" | "pretty";
  const logger = createLogger(config.server.logLevel, format);
  const lastResort = installLastResort(logger, config.server.drainTimeoutMs + CLOSE_MARGIN_MS);
  const cmdlineKeys = values["api-key"] ?? [];
  if (cmdlineKeys.length) hideApiKeys(args, logger);
  for (const w of threadBudget(config, availableParallelism()).warnings) logger.warn(`thread budget: ${w}`);
  if (config.server.role !== "all" && config.jobs.store === "sqlite") {
    logger.warn(
      `role ${config.server.role} with jobs.store sqlite: jobs are shared only with processes on this machine that open the same file; use jobs.store redis across machines`,
    );
  }
  if (config.server.processes > 1 && cluster.isPrimary) {
    logger.info({ processes: config.server.processes }, "starting serving processes");
    // The serving processes get --api-key values through their environment (readable by this
    // user only), not on their command lines; a key with a comma or outer spaces cannot travel that way.
    const forkEnv: Record<string, string> = {};
    if (cmdlineKeys.length && !cmdlineKeys.some((k) => k.includes(",") || k.trim() !== k)) {
      cluster.setupPrimary({ args: ["serve", ...withoutApiKeys(args)] });
      forkEnv.MODELPORT_API_KEYS = [...cmdlineKeys, process.env.MODELPORT_API_KEYS ?? ""]
        .filter(Boolean)
        .join(",");
    }
    const primary = runPrimary(config.server.processes, logger, forkEnv);
    lastResort.setDrain(() => {
      primary.stop("SIGTERM");
      return primary.done;
    });
    const code = await primary.done;
    await new Promise<void>((r) => logger.flush(() => r()));
    return code;
  }
  const server = buildApp(config, { logger });
  lastResort.setDrain(() => server.close());

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      // A second Ctrl-C means "now"; a repeated SIGTERM (a supervisor signalling the whole
      // process group, and the cluster primary forwarding it) must not cut the drain short.
      if (signal !== "SIGINT") return;
      logger.warn("SIGINT again: exiting without draining");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal, inFlight: server.inFlight() }, "shutting down: draining in-flight requests");
    server.close().then(
      () => {
        logger.info("stopped cleanly");
        logger.flush(() => process.exit(0));
      },
      (err) => {
        logger.error({ err }, "error while shutting down");
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));

  const address = await server.app.listen({ host: config.server.host, port: config.server.port });
  let grpcAddress: string | undefined;
  if (config.server.grpcPort !== undefined) {
    // Loaded only when asked for: grpc-js and the .proto cost nothing to a server without gRPC.
    const { startGrpcServer } = await import("../grpc/server.js");
    try {
      grpcAddress = (
        await startGrpcServer(server, { host: config.server.host, port: config.server.grpcPort })
      ).address;
    } catch (err) {
      logger.error({ err }, (err as Error).message);
      await server.close();
      return 1;
    }
  }
  logger.info(
    {
      address,
      ...(grpcAddress ? { grpcAddress } : {}),
      models: [...config.models, ...(config.languageModels ?? [])].map((m) => m.name),
    },
    `modelport listening on ${address}${grpcAddress ? ` (gRPC on ${grpcAddress})` : ""}`,
  );
  await server.loadModels();
  const readiness = server.catalogue.readiness();
  if (config.server.role === "api") {
    const runners = server.catalogue.pool?.all() ?? [];
    const up = runners.filter((r) => r.healthy).length;
    const say = `API tier: ${up} of ${runners.length} runner(s) answering`;
    if (readiness.ready) logger.info(`${say}; every model has a ready runner; docs at ${address}/docs`);
    else
      logger.warn({ reasons: readiness.reasons }, `${say}; not ready until every model has a ready runner`);
  } else if (readiness.ready) {
    const unchecked = server.catalogue.all().filter((h) => h.status().golden === "none").length;
    const checked = unchecked ? ` (${unchecked} without a golden file)` : ", every golden example matched";
    const served = config.models.length + (config.languageModels?.length ?? 0);
    logger.info(`ready: ${served} model(s) loaded${checked}; docs at ${address}/docs`);
  } else logger.error({ reasons: readiness.reasons }, "NOT READY: /readyz answers 503 until this is fixed");
  // Models with a runner: a warning if one is the bottleneck while cores stand idle (idle-cores.ts).
  if (config.server.role !== "api") {
    const cores = availableParallelism() / config.server.processes;
    new IdleCoresWatch(cores, () => runnerLoads(server), logger).start();
  }
  return new Promise<number>(() => {}); // runs until a signal
}

/** Each model with a local runner: its threads and how long its runner has been busy. */
function runnerLoads(server: ModelportApp): RunnerLoad[] {
  return server.catalogue.all().flatMap((m) => {
    const busy = m.status().batching?.runnerBusyMs;
    const threads = (m.config as { threads?: number }).threads;
    return busy === undefined || threads === undefined ? [] : [{ name: m.name, threads, runnerBusyMs: busy }];
  });
}

/** `args` with every --api-key and its value removed. */
function withoutApiKeys(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--api-key") i++;
    else if (!a.startsWith("--api-key=")) out.push(a);
  }
  return out;
}

/**
 * --api-key puts a secret on the command line, which other users read with `ps` or
 * /proc/PID/cmdline. On Linux, setting the process title overwrites that memory, so the
 * command line shows without its keys from here on (it was visible from exec until now); warn.
 */
function hideApiKeys(args: string[], logger: ReturnType<typeof createLogger>): void {
  process.title = ["modelport", "serve", ...withoutApiKeys(args), "--api-key ***"].join(" ");
  if (cluster.isPrimary) {
    logger.warn(
      "--api-key shows the key on the command line, readable by other users of this machine until start-up masks it; use --api-key-file FILE or MODELPORT_API_KEYS",
    );
  }
}
