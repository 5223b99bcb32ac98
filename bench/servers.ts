import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../src/loadgen/serve-child.js";
import { type Child, spawnChild } from "./children.js";
import { modelportPredictPath, NAIVE_PREDICT_PATH, type Workload } from "./workload.js";

const here = path.dirname(fileURLToPath(import.meta.url)); // dist/bench
const repoRoot = path.resolve(here, "../..");
const ADDRESS = /"address":"(http:\/\/127\.0\.0\.1:\d+)"/;
const START_TIMEOUT_MS = 60_000;

export interface RunningServer {
  /** The label in the results: "modelport", "naive", "bare", or a modelport variant such as "modelport-off". */
  name: string;
  kind: "modelport" | "naive" | "bare";
  modelName: string;
  /** How it was started, for the report (the model directory shown as <models>). */
  command: string;
  url: string;
  predictPath: string;
  child: Child;
}

/** Polls `url` until it answers 200; rejects if the child exits first or after `timeoutMs`. */
export async function waitOk(url: string, child: Child, timeoutMs = START_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    if (child.process.exitCode !== null)
      throw new Error(`server exited while loading\n${child.stderrTail()}`);
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
      last = `${res.status} ${await res.text()}`;
    } catch (err) {
      last = String(err);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready within ${timeoutMs} ms; last answer: ${last}`);
}

const INFO_VISIBLE = new Set(["info", "debug", "trace"]);

export interface ModelportVariant {
  /** Label in the results (default "modelport"). */
  name?: string;
  /** Extra serve flags, e.g. ["--batching", "off"]. */
  flags?: readonly string[];
  /** Start it under `taskset -c CPUS` (Linux): the server's threads on those cores only. */
  cpus?: string | null;
}

/** `node ARGS`, under `taskset -c CPUS` when given (taskset runs node in its own process). */
function spawnNode(args: readonly string[], label: string, cpus: string | null | undefined): Child {
  return cpus
    ? spawnChild("taskset", ["-c", cpus, process.execPath, ...args], label)
    : spawnChild(process.execPath, [...args], label);
}

/** How the report shows a server's command, with its taskset prefix. */
function shown(command: string, cpus: string | null | undefined): string {
  return cpus ? `taskset -c ${cpus} ${command}` : command;
}

/**
 * `node bin/modelport.js serve DIR/MODEL.onnx --port 0 --log-format json`, plus
 * `--log-level L` when not info and the variant's flags. The port comes from its "listening" log
 * line; at a level that hides that line a free port is picked beforehand instead. Ready once
 * GET /readyz answers 200.
 */
export function startModelport(
  modelDir: string,
  logLevel: string,
  workload: Workload,
  variant: ModelportVariant = {},
): Promise<RunningServer> {
  return launchModelport({
    name: variant.name ?? "modelport",
    modelName: workload.modelName,
    predictPath: modelportPredictPath(workload),
    args: [path.join(modelDir, workload.modelFile)],
    shownArgs: [`<models>/${workload.modelFile}`],
    logLevel,
    flags: variant.flags ?? [],
    cpus: variant.cpus ?? null,
  });
}

export interface ConfiguredModelport {
  /** Label in the results. */
  name: string;
  /** The YAML config file, and how the report shows its path (e.g. "<tmp>/modelport.yaml"). */
  configFile: string;
  shownConfigFile: string;
  /** The model the bench talks to (as named in the config) and its predict path. */
  modelName: string;
  logLevel: string;
  flags?: readonly string[];
}

/** `node bin/modelport.js serve -c FILE --port 0 --log-format json ...`, as startModelport. */
export function startModelportWithConfig(opts: ConfiguredModelport): Promise<RunningServer> {
  return launchModelport({
    name: opts.name,
    modelName: opts.modelName,
    predictPath: `/v1/models/${opts.modelName}/predict`,
    args: ["-c", opts.configFile],
    shownArgs: ["-c", opts.shownConfigFile],
    logLevel: opts.logLevel,
    flags: opts.flags ?? [],
  });
}

interface Launch {
  name: string;
  modelName: string;
  predictPath: string;
  /** serve's leading arguments (a model path, or -c FILE), and as the report shows them. */
  args: readonly string[];
  shownArgs: readonly string[];
  logLevel: string;
  flags: readonly string[];
  cpus?: string | null;
}

async function launchModelport(l: Launch): Promise<RunningServer> {
  const port = INFO_VISIBLE.has(l.logLevel) ? 0 : await freePort();
  const tail = ["--port", String(port), "--log-format", "json"];
  if (l.logLevel !== "info") tail.push("--log-level", l.logLevel);
  tail.push(...l.flags);
  const bin = path.join(repoRoot, "bin/modelport.js");
  const child = spawnNode([bin, "serve", ...l.args, ...tail], l.name, l.cpus);
  try {
    const url =
      port === 0 ? (await child.waitFor(ADDRESS, START_TIMEOUT_MS))[1]! : `http://127.0.0.1:${port}`;
    await waitOk(`${url}/readyz`, child);
    return {
      name: l.name,
      kind: "modelport",
      modelName: l.modelName,
      command: shown(`node bin/modelport.js serve ${[...l.shownArgs, ...tail].join(" ")}`, l.cpus),
      url,
      predictPath: l.predictPath,
      child,
    };
  } catch (err) {
    await child.stop(1000);
    throw err;
  }
}

/** `node dist/bench/naive-server.js DIR/MODEL.onnx 0`; it prints its address once loaded. */
export function startNaive(
  modelDir: string,
  workload: Workload,
  cpus?: string | null,
): Promise<RunningServer> {
  return startBaseline("naive-server", "naive", NAIVE_PREDICT_PATH, modelDir, workload, cpus);
}

/** `node dist/bench/bare-oip-server.js DIR/MODEL.onnx 0`: the model at /v2/models/NAME/infer. */
export function startBareOip(
  modelDir: string,
  workload: Workload,
  cpus?: string | null,
): Promise<RunningServer> {
  return startBaseline(
    "bare-oip-server",
    "bare",
    `/v2/models/${workload.modelName}/infer`,
    modelDir,
    workload,
    cpus,
  );
}

async function startBaseline(
  script: string,
  name: "naive" | "bare",
  predictPath: string,
  modelDir: string,
  workload: Workload,
  cpus: string | null | undefined,
): Promise<RunningServer> {
  const child = spawnNode(
    [path.join(here, `${script}.js`), path.join(modelDir, workload.modelFile), "0"],
    `${name} server`,
    cpus,
  );
  try {
    const url = (await child.waitFor(ADDRESS, START_TIMEOUT_MS))[1]!;
    return {
      name,
      kind: name,
      modelName: workload.modelName,
      command: shown(`node dist/bench/${script}.js <models>/${workload.modelFile} 0`, cpus),
      url,
      predictPath,
      child,
    };
  } catch (err) {
    await child.stop(1000);
    throw err;
  }
}
