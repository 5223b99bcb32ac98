// A changed model file or a model that no longer reproduces its golden example must show up
// as "not ready, because …", with predict answering 503 and the failure's own code, not as wrong
// answers. Such a model stays unready until someone fixes it, so the answer is not retryable and
// carries no Retry-After (docs/Errors.md, "Does a retry help?").
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { GoldenFile } from "../../src/golden.js";
import { testModels } from "../helpers/models.js";
import { type InProcessServer, postJson, REPO_ROOT, startInProcess } from "../helpers/server.js";

let models: string;
let dir: string;
const servers: InProcessServer[] = [];

before(async () => {
  models = await testModels();
  dir = mkdtempSync(join(tmpdir(), "modelport-integrity-"));
});

after(async () => {
  for (const s of servers) await s.close();
});

/** Copies NAME's model, manifest and golden into the scratch dir under `as`. */
function copyModel(name: string, as: string): string {
  for (const ext of [".onnx", ".manifest.json", ".golden.json"])
    copyFileSync(join(models, `${name}${ext}`), join(dir, `${as}${ext}`));
  return join(dir, `${as}.onnx`);
}

async function serveOne(path: string, flags = {}): Promise<InProcessServer> {
  const s = await startInProcess({ modelPath: path, flags });
  servers.push(s);
  return s;
}

describe("integrity and golden checks", () => {
  it("a model file whose bytes changed is not ready, says why, and predict answers 503 with its code, not retryable", async () => {
    const path = copyModel("churn-tree", "tampered");
    const bytes = readFileSync(path);
    const at = bytes.length - 20; // one flipped byte inside the tree weights
    bytes[at] = bytes[at]! ^ 0xff;
    writeFileSync(path, bytes);
    const s = await serveOne(path);

    const ready = await fetch(`${s.url}/readyz`);
    assert.equal(ready.status, 503);
    const body = (await ready.json()) as any;
    assert.equal(body.ready, false);
    assert.equal(body.models.tampered.code, "MP_ERR_MODEL_CHECKSUM_MISMATCH");
    assert.match(
      body.reasons[0],
      /^tampered: sha256 of .*tampered\.onnx is [0-9a-f]{64} but .*tampered\.manifest\.json says [0-9a-f]{64}/,
    );

    const res = await postJson(`${s.url}/v1/models/tampered/predict`, { rows: [[3, 95, 4, 1, 0, 20]] });
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, "MP_ERR_MODEL_CHECKSUM_MISMATCH");
    assert.equal(res.body.error.retryable, false);
    assert.equal(res.headers.get("retry-after"), null);
    assert.match(res.body.error.message, /sha256.*A retry cannot help/);
    assert.equal((await fetch(`${s.url}/v2/models/tampered/ready`)).status, 503);
    assert.equal((await fetch(`${s.url}/livez`)).status, 200, "still alive");
  });

  it("sha256 given on the command line is verified too", async () => {
    const path = copyModel("segment-mlp", "pinned");
    const wrong = "0".repeat(64);
    const s = await serveOne(path, { sha256: wrong });
    const body = (await (await fetch(`${s.url}/readyz`)).json()) as any;
    assert.equal(body.models.pinned.code, "MP_ERR_MODEL_CHECKSUM_MISMATCH");
    assert.match(body.models.pinned.reason, /command line: models\[0\]\.sha256 says 0{64}/);
  });

  it("a swapped file that loads fine but scores differently fails its golden check with a diff", async () => {
    // segment-mlp's weights under a name whose golden file expects other outputs: same
    // inputs and outputs, different answers, exactly the case a golden example exists for.
    const path = copyModel("segment-mlp", "swapped");
    const golden = JSON.parse(readFileSync(join(dir, "swapped.golden.json"), "utf8")) as GoldenFile;
    const probs = golden.outputs.probabilities!.data as number[];
    probs[0] = (probs[0] as number) + 0.01;
    writeFileSync(join(dir, "swapped.golden.json"), JSON.stringify(golden));
    const s = await serveOne(path);
    const body = (await (await fetch(`${s.url}/readyz`)).json()) as any;
    assert.equal(body.ready, false);
    assert.equal(body.models.swapped.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.match(
      body.models.swapped.reason,
      /output 'probabilities': 1 of \d+ values differ beyond tolerance [\d.e-]+; worst at flat index 0: got [\d.]+, expected [\d.]+/,
    );
    const info = (await (await fetch(`${s.url}/v1/models/swapped`)).json()) as any;
    assert.equal(info.status.golden, "failed");
    assert.equal(info.status.golden_diff[0].output, "probabilities");
    // A retry cannot cure a golden mismatch: every surface says so, none asks to retry.
    const row = [0.5, 0.5, 0.5, 0.5];
    const res = await postJson(`${s.url}/v1/models/swapped/predict`, { rows: [row] });
    assert.equal(res.status, 503);
    assert.equal(res.body.error.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.equal(res.body.error.retryable, false);
    assert.equal(res.headers.get("retry-after"), null);
    assert.match(res.body.error.message, /golden.*A retry cannot help/s);
    const oip = await postJson(`${s.url}/v2/models/swapped/infer`, {
      inputs: [{ name: "features", shape: [1, 4], datatype: "FP32", data: row }],
    });
    assert.equal(oip.status, 503);
    assert.equal(oip.body.code, "MP_ERR_MODEL_GOLDEN_MISMATCH");
    assert.equal(oip.headers.get("retry-after"), null);
  });

  it("a tolerance loose enough for the difference lets it pass", async () => {
    const path = copyModel("segment-mlp", "loose");
    const golden = JSON.parse(readFileSync(join(dir, "loose.golden.json"), "utf8")) as GoldenFile;
    (golden.outputs.probabilities!.data as number[])[0]! += 0.001;
    golden.tolerance = { probabilities: 0.01 };
    writeFileSync(join(dir, "loose.golden.json"), JSON.stringify(golden));
    const s = await serveOne(path);
    assert.equal((await fetch(`${s.url}/readyz`)).status, 200);
  });

  it("a file that is not an ONNX model fails to load with the backend's reason", async () => {
    const path = join(dir, "garbage.onnx");
    writeFileSync(path, "this is not a protobuf");
    const s = await serveOne(path);
    const body = (await (await fetch(`${s.url}/readyz`)).json()) as any;
    assert.equal(body.models.garbage.code, "MP_ERR_MODEL_LOAD_FAILED");
    assert.match(body.models.garbage.reason, /onnxruntime could not load/);
  });

  it("device cuda: on a working CUDA provider the model loads and answers; without one it fails clearly, never on the CPU", async (t) => {
    // Whether onnxruntime itself can start its CUDA provider here decides what modelport must do.
    const probe = cudaProbe(join(models, "segment-mlp.onnx"));
    t.diagnostic(
      `onnxruntime's CUDA provider here: ${probe.ok ? "starts" : `does not start (${probe.reason})`}`,
    );
    const path = copyModel("segment-mlp", "on-gpu");
    const s = await serveOne(path, { device: "cuda" });
    const ready = await fetch(`${s.url}/readyz`);
    const body = (await ready.json()) as any;
    if (probe.ok) {
      // Ready means the golden example scored right on the GPU.
      assert.equal(ready.status, 200, JSON.stringify(body));
      const rows = [[0.5, -1, 2, 0.25]];
      const gpu = await postJson(`${s.url}/v1/models/on-gpu/predict`, { rows });
      const cpu = await postJson(
        `${(await serveOne(copyModel("segment-mlp", "on-cpu"))).url}/v1/models/on-cpu/predict`,
        { rows },
      );
      assert.equal(gpu.status, 200, JSON.stringify(gpu.body));
      assert.equal(cpu.status, 200, JSON.stringify(cpu.body));
      const [g, c] = [gpu.body.outputs.probabilities.flat(), cpu.body.outputs.probabilities.flat()];
      assert.equal(g.length, c.length);
      for (let i = 0; i < g.length; i++)
        assert.ok(Math.abs(g[i] - c[i]) < 1e-4, `value ${i}: ${g[i]} on cuda, ${c[i]} on cpu`);
    } else {
      assert.equal(ready.status, 503);
      assert.equal(body.models["on-gpu"].code, "MP_ERR_MODEL_LOAD_FAILED");
      assert.match(
        body.models["on-gpu"].reason,
        /device cuda: onnxruntime's CUDA execution provider could not start.*use device: cpu/,
      );
      // It names the GPU install command README gives, word for word.
      const gpuInstall = /ONNXRUNTIME_NODE_INSTALL=\S+ MODELPORT_INSTALL=\S+ npm install modelport/.exec(
        readFileSync(join(REPO_ROOT, "README.md"), "utf8"),
      )?.[0];
      assert.ok(gpuInstall, "README gives the GPU install command");
      assert.ok(body.models["on-gpu"].reason.includes(gpuInstall), body.models["on-gpu"].reason);
      const res = await postJson(`${s.url}/v1/models/on-gpu/predict`, { rows: [[0, 0, 0, 0]] });
      assert.equal(res.status, 503, "no answer computed on the CPU instead");
      assert.equal(res.body.error.code, "MP_ERR_MODEL_LOAD_FAILED");
      assert.equal(res.headers.get("retry-after"), null);
    }
  });
});

/** Asks onnxruntime directly, in a separate process, whether a CUDA session starts for `model`. */
function cudaProbe(model: string): { ok: true } | { ok: false; reason: string } {
  const script = `const ort = await import("onnxruntime-node");
try { await ort.InferenceSession.create(${JSON.stringify(model)}, { executionProviders: ["cuda"] }); console.log("CUDA-OK"); }
catch (e) { console.log("CUDA-FAIL " + e.message); }`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 120_000,
  });
  if (r.stdout.includes("CUDA-OK")) return { ok: true };
  return {
    ok: false,
    reason: /CUDA-FAIL (.*)/.exec(r.stdout)?.[1] ?? `probe exited ${r.status}: ${r.stderr.slice(-300)}`,
  };
}
