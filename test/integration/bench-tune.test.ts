// `modelport bench` and `modelport tune` as a user runs them: real CLI processes, a real server,
// short measurements (about a second per point).
import assert from "node:assert/strict";
import { isUtf8 } from "node:buffer";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { explain, type Measured, pickWinner, powersUpTo, tunedYaml } from "../../src/cli/tune.js";
import { loadConfig } from "../../src/config/load.js";
import { chartSvg, niceTicks } from "../../src/loadgen/chart.js";
import type { LoadResult } from "../../src/loadgen/load.js";
import { bodyFromGolden, bodyFromSignature } from "../../src/loadgen/target.js";
import { testModels } from "../helpers/models.js";
import { CLI, startChild, waitReady } from "../helpers/server.js";

let models: string;
let dir: string;

before(async () => {
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-bench-tune-"));
});

/** Runs the CLI without blocking this process (a server child must keep draining its logs). */
function run(
  args: string[],
  timeoutMs = 90_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (c: Buffer) => {
      stdout += c;
    });
    proc.stderr.on("data", (c: Buffer) => {
      stderr += c;
    });
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`modelport ${args.join(" ")} ran over ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Checks that every element is closed in order (enough for a hand-written SVG). */
function assertBalancedXml(text: string): void {
  const stack: string[] = [];
  for (const m of text.matchAll(/<(\/?)([A-Za-z][\w:-]*)[^>]*?(\/?)>/g)) {
    const [, closing, name, selfClosing] = m;
    if (selfClosing) continue;
    if (closing) assert.equal(stack.pop(), name, `</${name}> closes the wrong element`);
    else stack.push(name!);
  }
  assert.deepEqual(stack, [], "unclosed elements");
  assert.doesNotMatch(text.replace(/<[^>]*>/g, ""), /[<>]|&(?!(lt|gt|amp|quot|apos);)/, "unescaped text");
}

function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

describe("modelport bench", () => {
  it("loads a running server at each concurrency and writes JSON results and a chart", {
    timeout: 90_000,
  }, async () => {
    const server = await startChild([join(models, "churn-tree.onnx")]);
    try {
      assert.equal((await waitReady(server.url)).status, 200);
      const json = join(dir, "bench.json");
      const svg = join(dir, "bench.svg");
      const r = await run([
        "bench",
        server.url,
        "--model",
        "churn-tree",
        "--concurrency",
        "1,4",
        "--duration",
        "1",
        "--warmup",
        "0.5",
        "--json",
        json,
        "--chart",
        svg,
      ]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.match(r.stdout, /concurrency\s+req\/s\s+p50 ms\s+p90 ms\s+p99 ms\s+errors\s+non-2xx/);
      assert.match(r.stderr, /c=1: .* req\/s/); // one plain progress line per run (stderr is not a TTY)

      const out = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(out.settings.method, "POST");
      assert.match(out.settings.url, /\/v1\/models\/churn-tree\/predict$/);
      assert.deepEqual(out.settings.concurrency, [1, 4]);
      assert.equal(out.settings.durationS, 1);
      assert.ok(out.machine.cpus >= 1 && out.machine.memoryBytes > 0 && out.machine.node);
      assert.ok(!Number.isNaN(Date.parse(out.date)));
      assert.deepEqual(
        out.results.map((x: any) => x.concurrency),
        [1, 4],
      );
      for (const x of out.results) {
        assert.ok(x.rps > 0, `rps at concurrency ${x.concurrency}`);
        assert.equal(x.errors, 0);
        assert.equal(x.non2xx, 0);
        assert.ok(x.latencyMs.p50 > 0 && x.latencyMs.p99 >= x.latencyMs.p50);
      }

      const chart = readFileSync(svg, "utf8");
      assert.ok(chart.startsWith("<svg"), chart.slice(0, 80));
      assert.ok(chart.trimEnd().endsWith("</svg>"));
      assertBalancedXml(chart);
      for (const label of [
        "p50 latency",
        "p99 latency",
        "throughput",
        "concurrency (connections)",
        "latency (ms)",
      ])
        assert.ok(chart.includes(label), `chart lacks '${label}'`);
    } finally {
      await server.stop();
    }
  });

  it("sends a --body file's bytes as they are: a binary OIP request", { timeout: 60_000 }, async () => {
    const server = await startChild([join(models, "churn-tree.onnx")]);
    try {
      assert.equal((await waitReady(server.url)).status, 200);
      // FP32 bytes that are not UTF-8 (95 is 00 00 BE 42): read as text, they would change.
      const values = Float32Array.of(3, 95, 4, 1, 0, 20);
      const raw = Buffer.from(values.buffer);
      assert.equal(isUtf8(raw), false);
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            {
              name: "features",
              datatype: "FP32",
              shape: [1, 6],
              parameters: { binary_data_size: raw.length },
            },
          ],
        }),
      );
      const file = join(dir, "request.bin");
      writeFileSync(file, Buffer.concat([header, raw]));
      const json = join(dir, "bench-binary.json");
      const r = await run([
        "bench",
        `${server.url}/v2/models/churn-tree/infer`,
        "--body",
        `@${file}`,
        "--header",
        `inference-header-content-length: ${header.length}`,
        "--concurrency",
        "1",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--json",
        json,
      ]);
      assert.equal(r.code, 0, r.stderr + r.stdout);
      assert.doesNotMatch(r.stderr, /trial request answered/);
      const out = JSON.parse(readFileSync(json, "utf8"));
      assert.equal(out.settings.bodyBytes, header.length + raw.length);
      assert.equal(out.settings.body, undefined, "bytes that are not text are not shown");
      assert.ok(out.results[0].rps > 0);
      assert.equal(out.results[0].non2xx, 0);
      assert.equal(out.results[0].errors, 0);
    } finally {
      await server.stop();
    }
  });

  it("fails with a clear message when nothing listens at the URL", { timeout: 30_000 }, async () => {
    const port = await closedPort();
    const r = await run(["bench", `http://127.0.0.1:${port}`, "--duration", "1"]);
    assert.equal(r.code, 1, r.stderr + r.stdout);
    assert.match(r.stderr, /cannot reach http:\/\/127\.0\.0\.1:\d+\/: connection refused/);
  });
});

describe("modelport tune", () => {
  it("measures several layouts, prints them and writes a config serve accepts", {
    timeout: 120_000,
  }, async () => {
    const out = join(dir, "tuned.yaml");
    const r = await run([
      "tune",
      join(models, "churn-tree.onnx"),
      "--quick",
      "--duration",
      "1",
      "--out",
      out,
    ]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /P\s+T\s+batching\s+req\/s\s+p50 ms\s+p99 ms\s+errors\s+note/);
    const measured = [
      ...r.stdout.matchAll(/^(\d+)\s+(\d+)\s+(off|adaptive (\d+) rows\/([\d.]+) ms)\s+[\d,.]+\s/gm),
    ];
    assert.ok(measured.length >= 2, r.stdout);
    if (availableParallelism() < 4) assert.match(r.stdout, /^2\s+2\s+\(any\).*skipped: .*cores/m);
    assert.match(r.stdout, /Recommended: .*highest throughput|No layout kept p99/);
    assert.match(r.stderr, /from churn-tree\.golden\.json \(its first row\)/);

    const line = r.stdout.split("\n").find((l) => l.endsWith("<- recommended"));
    assert.ok(line, `no row marked recommended:\n${r.stdout}`);
    const winner = /^(\d+)\s+(\d+)\s+(off|adaptive (\d+) rows\/([\d.]+) ms)\s/.exec(line);
    assert.ok(winner, line);
    const config = loadConfig({ file: out });
    const model = config.models[0]!;
    assert.equal(model.name, "churn-tree");
    assert.equal(config.server.processes, Number(winner[1]));
    assert.equal(model.threads, Number(winner[2]));
    if (winner[3] === "off") assert.equal(model.batching.enabled, false);
    else {
      assert.equal(model.batching.enabled, true);
      assert.equal(model.batching.maxBatchRows, Number(winner[4]));
      assert.equal(model.batching.maxDelayMs, Number(winner[5]));
    }
    assert.match(readFileSync(out, "utf8"), /^# Written by modelport tune/);
  });
});

describe("load generator and tune pieces", () => {
  const result = (rps: number, p99: number, errors = 0): LoadResult => ({
    concurrency: 32,
    durationS: 1,
    requests: rps,
    rps,
    latencyMs: { p50: p99 / 2, p90: p99, p99, max: p99, mean: p99 / 2 },
    autocannonLatencyMs: { p50: 0, p99: 0 },
    errors,
    timeouts: 0,
    non2xx: 0,
    statusCodes: { "200": rps },
    errorMessages: [],
  });
  const layout = (processes: number, threads: number) => ({
    processes,
    threads,
    batching: { enabled: false as const },
  });
  const measured = (p: number, t: number, r: LoadResult): Measured => ({
    layout: layout(p, t),
    outcome: "measured",
    result: r,
  });

  it("picks the most requests/s among error-free layouts within the p99 target", () => {
    const rows: Measured[] = [
      measured(1, 1, result(1000, 20)),
      measured(1, 2, result(3000, 150)), // over the target
      measured(2, 1, result(5000, 10, 3)), // errors
      measured(2, 2, result(1500, 30)),
      { layout: layout(4, 4), outcome: "skipped", reason: "thread budget" },
    ];
    const pick = pickWinner(rows, 100)!;
    assert.equal(pick.winner, rows[3]);
    assert.equal(pick.runnerUp, rows[0]);
    assert.equal(pick.met, true);
    assert.match(
      explain(pick, 100),
      /^Recommended: 2 processes × 2 threads, no batching, the highest throughput .* 50% ahead/,
    );
    // None within the target: the lowest p99 without errors, said plainly.
    const none = pickWinner([measured(1, 1, result(1000, 300)), measured(1, 2, result(900, 200))], 100)!;
    assert.equal(none.met, false);
    assert.equal(none.winner.layout.threads, 2);
    assert.match(explain(none, 100), /^No layout kept p99 within 100 ms/);
    assert.equal(pickWinner([measured(1, 1, result(1000, 10, 1))], 100), undefined);
  });

  it("writes YAML that loads as a config", () => {
    const yaml = tunedYaml({
      name: "m",
      backend: "onnx",
      modelPath: "./m.onnx",
      layout: {
        processes: 2,
        threads: 1,
        batching: { enabled: true, maxBatchRows: 16, maxDelayMs: 5, adaptive: true },
      },
      comment: ["hello"],
    });
    assert.match(yaml, /^# hello\nserver:\n {2}processes: 2\n/);
    assert.match(yaml, /maxBatchRows: 16/);
  });

  it("builds request bodies from golden rows and from declared inputs", () => {
    const golden = {
      inputs: { features: { datatype: "FP32" as const, shape: [2, 3], data: [1, 2, 3, 4, 5, 6] } },
      outputs: {},
    };
    assert.deepEqual(JSON.parse(bodyFromGolden(golden, true)), {
      inputs: { features: { data: [1, 2, 3], shape: [1, 3] } },
    });
    assert.deepEqual(JSON.parse(bodyFromGolden(golden, false)).inputs.features.shape, [2, 3]);
    assert.deepEqual(
      JSON.parse(
        bodyFromSignature([
          { name: "x", datatype: "FP32", shape: [-1, 2] },
          { name: "ids", datatype: "INT64", shape: [-1] },
          { name: "flag", datatype: "BOOL", shape: [] },
        ]),
      ),
      { inputs: { x: { data: [0.5, 0.5], shape: [1, 2] }, ids: { data: [1], shape: [1] }, flag: false } },
    );
    assert.throws(() => bodyFromSignature([{ name: "x", datatype: "FP32" }]), /no declared shape.*--body/);
  });

  it("chooses round axis ticks, layout sizes, and escapes chart text", () => {
    assert.deepEqual(niceTicks(7.5), [0, 2, 4, 6, 8]);
    assert.deepEqual(niceTicks(9940), [0, 2000, 4000, 6000, 8000, 10000]);
    assert.deepEqual(powersUpTo(6), [1, 2, 4, 6]);
    assert.deepEqual(powersUpTo(1), [1]);
    const svg = chartSvg([{ concurrency: 1, rps: 10, p50: null, p99: null }], { title: "a<b & c" });
    assert.ok(svg.includes("a&lt;b &amp; c"));
    assertBalancedXml(svg);
  });
});
