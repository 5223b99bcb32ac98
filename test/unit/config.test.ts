// Configuration is validated once at start: a bad config lists every problem with its file and
// key, and `modelport serve` exits non-zero before anything listens.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { parse, SERVE_OPTIONS, serveFlags } from "../../src/cli/args.js";
import { ConfigError, loadConfig } from "../../src/config/load.js";
import { testModels } from "../helpers/models.js";
import { CLI } from "../helpers/server.js";

let models: string;
let dir: string;

before(async () => {
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-config-"));
});

function yaml(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.problems;
  }
  assert.fail("expected a ConfigError");
}

describe("config", () => {
  it("a single model path: named after the file, backend from the extension, manifest and golden found beside it", () => {
    const c = loadConfig({ modelPath: join(models, "churn-tree.onnx"), env: {} });
    assert.equal(c.models.length, 1);
    const m = c.models[0]!;
    assert.equal(m.name, "churn-tree");
    assert.equal(m.backend, "onnx");
    assert.match(m.sha256!, /^[0-9a-f]{64}$/);
    assert.equal(m.golden, join(models, "churn-tree.golden.json"));
    assert.equal(m.threads, 1);
    assert.equal(c.server.port, 8080);
    assert.equal(c.server.host, "127.0.0.1");
    assert.ok(Object.isFrozen(c) && Object.isFrozen(c.models[0]) && Object.isFrozen(c.server));
  });

  it("--name and flags override; MODELPORT_API_KEYS adds keys", () => {
    const c = loadConfig({
      modelPath: join(models, "churn-tree.onnx"),
      flags: { name: "churn", port: 9000, threads: 2, maxBatchRows: 16 },
      env: { MODELPORT_API_KEYS: "key-one-123, key-two-456" },
    });
    assert.equal(c.models[0]!.name, "churn");
    assert.equal(c.models[0]!.threads, 2);
    assert.equal(c.models[0]!.limits.maxBatchRows, 16);
    assert.equal(c.server.port, 9000);
    assert.deepEqual(c.server.apiKeys, ["key-one-123", "key-two-456"]);
  });

  it("a YAML file with several models; paths are relative to the file", () => {
    const file = yaml(
      "ok.yaml",
      `server: {port: 0}\nmodels:\n  - {name: a, path: ${join(models, "churn-tree.onnx")}}\n  - {name: b, path: ${join(models, "segment-mlp.onnx")}, threads: 2, limits: {maxBatchRows: 4}}\n`,
    );
    const c = loadConfig({ file, env: {}, cores: 4 });
    assert.deepEqual(
      c.models.map((m) => [m.name, m.threads, m.limits.maxBatchRows]),
      [
        ["a", 1, 1024],
        ["b", 2, 4],
      ],
    );
    assert.equal(c.source, file);
  });

  it("lists every problem at once, each with file and key", () => {
    const file = yaml(
      "bad.yaml",
      [
        "server:",
        "  port: 99999",
        "  colour: blue",
        "models:",
        "  - name: 'bad name!'",
        "    path: nowhere.onnx",
        "    threads: 0",
        `  - name: dup`,
        `    path: ${join(models, "churn-tree.onnx")}`,
        "    sha256: xyz",
        `  - name: dup2`,
        `    path: ${join(models, "churn-tree.onnx")}`,
        "    backend: tensorflow",
      ].join("\n"),
    );
    const list = problems(() => loadConfig({ file, env: {} }));
    const text = list.join("\n");
    for (const expected of [
      /bad\.yaml: server\.port: .*65535/,
      /bad\.yaml: server: Unrecognized key: "colour"/,
      /bad\.yaml: models\[0\]\.name: use letters/,
      /bad\.yaml: models\[0\]\.threads: /,
      /bad\.yaml: models\[1\]\.sha256: expected 64 hexadecimal characters/,
      /bad\.yaml: models\[2\]\.backend: /,
    ]) {
      assert.match(text, expected);
    }
    assert.ok(list.length >= 6, text);
  });

  it("missing files and duplicate names are reported with their keys", () => {
    const file = yaml(
      "files.yaml",
      `models:\n  - {name: a, path: missing.onnx}\n  - {name: a, path: ${join(models, "churn-tree.onnx")}, golden: nope.json}\n`,
    );
    const text = problems(() => loadConfig({ file, env: {} })).join("\n");
    assert.match(text, /files\.yaml: models\[0\]\.path: .*missing\.onnx does not exist/);
    assert.match(text, /files\.yaml: models\[1\]\.golden: .*nope\.json does not exist/);
    assert.match(text, /files\.yaml: models\[1\]\.name: 'a' is already used by models\[0\]/);
  });

  it("schema errors and missing model files are listed together, in one run", () => {
    const file = yaml(
      "mixed.yaml",
      [
        "server: {port: -1}",
        "models:",
        "  - {name: a, path: missing.onnx, threads: 0}",
        "  - {name: b, path: also-missing.onnx, golden: nope.golden.json}",
        `  - {name: c, path: ${join(models, "churn-tree.onnx")}}`,
        "  - {name: up, backend: upstream, upstream: {url: 'http://127.0.0.1:1/v1', model: m}}",
      ].join("\n"),
    );
    const text = problems(() => loadConfig({ file, env: {} })).join("\n");
    assert.match(text, /mixed\.yaml: server\.port: /);
    assert.match(text, /mixed\.yaml: models\[0\]\.threads: /);
    assert.match(text, /mixed\.yaml: models\[0\]\.path: .*missing\.onnx does not exist/);
    assert.match(text, /mixed\.yaml: models\[1\]\.path: .*also-missing\.onnx does not exist/);
    assert.match(text, /mixed\.yaml: models\[1\]\.golden: .*nope\.golden\.json does not exist/);
    assert.doesNotMatch(
      text,
      /models\[2\]|models\[3\]/,
      "a file that exists, or an upstream URL, is no problem",
    );
  });

  it("role api: needs runners, checks their URLs, and needs no model files on its machine", () => {
    const file = yaml(
      "api.yaml",
      "server: {role: api}\nmodels:\n  - {name: m, path: /nowhere/m.onnx, threads: 64}\n",
    );
    assert.match(
      problems(() => loadConfig({ file, env: {} })).join("\n"),
      /server\.runners: role api forwards to runners/,
    );
    assert.match(
      problems(() => loadConfig({ file, flags: { runners: ["10.0.0.5:8080"] }, env: {} })).join("\n"),
      /server\.runners\[0\]: '10\.0\.0\.5:8080' is not a base URL/,
    );
    const c = loadConfig({
      file,
      flags: { runners: ["http://10.0.0.5:8080"] },
      env: { MODELPORT_RUNNERS: "dns+http://runners.ns.svc:8080, http://10.0.0.6:8080" },
    });
    assert.equal(c.server.role, "api");
    // The path need not exist and 64 threads do not count against this machine's cores.
    assert.equal(c.models[0]!.path, "/nowhere/m.onnx");
    assert.deepEqual(c.server.runners, [
      "http://10.0.0.5:8080",
      "dns+http://runners.ns.svc:8080",
      "http://10.0.0.6:8080",
    ]);
    // The same file as a runner: now the model file must be there.
    assert.match(
      problems(() => loadConfig({ file, flags: { role: "runner" }, env: {} })).join("\n"),
      /models\[0\]\.path: \/nowhere\/m\.onnx does not exist/,
    );
  });

  it("thread budget: an oversubscribed layout is refused with the reason and a docs link", () => {
    const path = join(models, "churn-tree.onnx");
    const alone = problems(() => loadConfig({ modelPath: path, flags: { threads: 4 }, env: {}, cores: 2 }));
    assert.match(
      alone.join("\n"),
      /thread budget: model 'churn-tree': 1 process\(es\) × 4 threads = 4 > 2 cores.*docs\/Performance-tuning\.md/,
    );
    const procs = problems(() =>
      loadConfig({ modelPath: path, flags: { threads: 2, processes: 2 }, env: {}, cores: 2 }),
    );
    assert.match(procs.join("\n"), /2 process\(es\) × 2 threads = 4 > 2 cores/);
    const file = yaml(
      "budget.yaml",
      `models:\n  - {name: a, path: ${path}}\n  - {name: b, path: ${path}, threads: 2}\n`,
    );
    assert.match(
      problems(() => loadConfig({ file, env: {}, cores: 2 })).join("\n"),
      /3 math threads on 2 cores: multi-threaded models \(b\)/,
    );
    // What fits: the same on 4 cores, single-threaded models sharing cores, or an explicit override.
    assert.equal(loadConfig({ file, env: {}, cores: 4 }).models.length, 2);
    assert.equal(
      loadConfig({ modelPath: path, flags: { processes: 3 }, env: {}, cores: 2 }).server.processes,
      3,
    );
    assert.equal(
      loadConfig({ modelPath: path, flags: { threads: 4, allowOversubscription: true }, env: {}, cores: 2 })
        .models[0]!.threads,
      4,
    );
  });

  it("shared memory: --shared-memory turns it on, several processes refuse it, a bad prefix or per-key limit is listed", async () => {
    const path = join(await testModels(), "churn-tree.onnx");
    assert.equal(loadConfig({ modelPath: path, env: {} }).server.sharedMemory.enabled, false);
    const on = loadConfig({ modelPath: path, flags: { sharedMemory: true }, env: {} }).server.sharedMemory;
    // The prefix is on by default; "" (every name) only when asked for.
    assert.deepEqual(on, { enabled: true, keyPrefix: "modelport_", maxRegions: 64, maxRegionsPerKey: 16 });
    assert.match(
      problems(() =>
        loadConfig({ modelPath: path, flags: { sharedMemory: true, processes: 2 }, env: {}, cores: 4 }),
      ).join("\n"),
      /server\.sharedMemory\.enabled.*processes: 1/,
    );
    const file = yaml(
      "shm.yaml",
      `server:\n  sharedMemory: {enabled: true, keyPrefix: "../x"}\nmodels:\n  - {name: a, path: ${path}}\n`,
    );
    assert.match(problems(() => loadConfig({ file, env: {} })).join("\n"), /server\.sharedMemory\.keyPrefix/);
    const shm = (settings: string) =>
      yaml(
        "shm-limits.yaml",
        `server:\n  sharedMemory: {${settings}}\nmodels:\n  - {name: a, path: ${path}}\n`,
      );
    const optOut = loadConfig({ file: shm(`enabled: true, keyPrefix: ""`), env: {} }).server.sharedMemory;
    assert.equal(optOut.keyPrefix, "");
    // Per key: 16 by default, or maxRegions when that is less; never more than maxRegions.
    const few = loadConfig({ file: shm("enabled: true, maxRegions: 8"), env: {} }).server.sharedMemory;
    assert.equal(few.maxRegionsPerKey, 8);
    assert.match(
      problems(() => loadConfig({ file: shm("maxRegions: 8, maxRegionsPerKey: 9"), env: {} })).join("\n"),
      /server\.sharedMemory\.maxRegionsPerKey: maxRegionsPerKey must not exceed maxRegions/,
    );
  });

  it("allowedHosts and allowedOrigins: unset by default, from the file, replaced by --allowed-host/--allowed-origin, bad entries listed", async () => {
    const path = join(await testModels(), "churn-tree.onnx");
    const plain = loadConfig({ modelPath: path, env: {} }).server;
    assert.equal(plain.allowedHosts, undefined, "unset, not empty: a server with keys then checks no Host");
    assert.deepEqual(plain.allowedOrigins, []);
    const file = yaml(
      "browsers.yaml",
      `server:\n  allowedHosts: [models.internal, .example.org]\n  allowedOrigins: ["https://app.example.com"]\nmodels:\n  - {name: a, path: ${path}}\n`,
    );
    const fromFile = loadConfig({ file, env: {} }).server;
    assert.deepEqual(fromFile.allowedHosts, ["models.internal", ".example.org"]);
    assert.deepEqual(fromFile.allowedOrigins, ["https://app.example.com"]);
    const flags = serveFlags(
      parse(
        ["--allowed-host", "a.internal", "--allowed-host", "*", "--allowed-origin", "http://x:81"],
        SERVE_OPTIONS,
      ).values,
    );
    const fromFlags = loadConfig({ file, flags, env: {} }).server;
    assert.deepEqual(fromFlags.allowedHosts, ["a.internal", "*"]);
    assert.deepEqual(fromFlags.allowedOrigins, ["http://x:81"]);
    const bad = yaml(
      "bad-browsers.yaml",
      `server:\n  allowedHosts: ["evil.example/x", ""]\n  allowedOrigins: ["https://app.example.com/path", "app.example.com", "null"]\nmodels:\n  - {name: a, path: ${path}}\n`,
    );
    const listed = problems(() => loadConfig({ file: bad, env: {} })).join("\n");
    for (const key of [
      "server.allowedHosts[0]",
      "server.allowedHosts[1]",
      "server.allowedOrigins[0]",
      "server.allowedOrigins[1]",
      "server.allowedOrigins[2]",
    ])
      assert.ok(listed.includes(key), `${key} in:\n${listed}`);
  });

  it("invalid YAML names the line", () => {
    const file = yaml("syntax.yaml", "models:\n  - name: a\n    path: [unclosed\n");
    assert.match(
      problems(() => loadConfig({ file, env: {} }))[0]!,
      /syntax\.yaml at line \d+: not valid YAML/,
    );
  });

  it("modelport serve with a bad config exits 2 before listening and prints every problem", () => {
    const file = yaml("cli.yaml", "server: {port: -1}\nmodels: []\n");
    const run = spawnSync(process.execPath, [CLI, "serve", "-c", file], {
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(run.status, 2);
    assert.match(run.stderr, /MP_ERR_CONFIG_INVALID/);
    assert.match(run.stderr, /cli\.yaml: server\.port/);
    assert.match(run.stderr, /cli\.yaml: models: serve at least one model/);
    assert.doesNotMatch(run.stdout, /listening/);
  });

  it("unknown flags and commands exit 2 with a hint", () => {
    const flag = spawnSync(process.execPath, [CLI, "serve", "--colour", "x"], { encoding: "utf8" });
    assert.equal(flag.status, 2);
    assert.match(flag.stderr, /Unknown option '--colour'/);
    const cmd = spawnSync(process.execPath, [CLI, "fly"], { encoding: "utf8" });
    assert.equal(cmd.status, 2);
    assert.match(cmd.stderr, /unknown command 'fly'/);
    const help = spawnSync(process.execPath, [CLI, "serve", "--help"], { encoding: "utf8" });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /--max-batch-rows/);
  });
});
