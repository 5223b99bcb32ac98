// onnxruntime's own telemetry (src/backends/ort-telemetry.ts) through `modelport serve`: off unless
// the operator turns it on. The witness is onnxruntime's: it writes mat-debug-<pid>.log in the
// process's TMPDIR when its telemetry starts there. ORT_DISABLE_TELEMETRY=0 keeps onnxruntime's
// default, which also shows that this onnxruntime build writes the file (so its absence means
// something). An empty value counts as unset: onnxruntime itself would leave telemetry on for it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { testModels } from "../helpers/models.js";
import { postJson, startChild, waitReady } from "../helpers/server.js";

// onnxruntime starts no telemetry where any of these is set (a CI run): the servers here run without them.
const NOT_CI = Object.fromEntries(
  [
    "CI",
    "BUILDKITE",
    "CIRCLECI",
    "CODEBUILD_BUILD_ID",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "JENKINS_URL",
    "SYSTEM_TEAMFOUNDATIONCOLLECTIONURI",
    "TEAMCITY_VERSION",
    "TF_BUILD",
    "TRAVIS",
  ].map((name) => [name, undefined]),
);

let model: string;
before(async () => {
  model = join(await testModels(), "churn-tree.onnx");
});

/**
 * Whether onnxruntime's telemetry started in a server run with ORT_DISABLE_TELEMETRY `value`
 * (undefined: not in its environment at all), after one prediction.
 */
async function telemetryStarted(value: string | undefined): Promise<boolean> {
  const dir = mkdtempSync(join(tmpdir(), "modelport-ort-"));
  const child = await startChild([model], {
    ORT_DISABLE_TELEMETRY: value,
    MODELPORT_API_KEYS: "",
    TMPDIR: dir,
    ...NOT_CI,
  });
  try {
    await waitReady(child.url);
    const res = await postJson(`${child.url}/v1/models/churn-tree/predict`, { rows: [[1, 2, 3, 1, 0, 4]] });
    assert.equal(res.status, 200);
    return existsSync(join(dir, `mat-debug-${child.proc.pid}.log`));
  } finally {
    await child.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("onnxruntime's telemetry", () => {
  it("is off by default (ORT_DISABLE_TELEMETRY unset or empty) and on with ORT_DISABLE_TELEMETRY=0", async () => {
    assert.equal(
      await telemetryStarted("0"),
      true,
      "ORT_DISABLE_TELEMETRY=0: onnxruntime starts its telemetry",
    );
    assert.equal(await telemetryStarted(undefined), false, "unset: modelport turns it off");
    assert.equal(await telemetryStarted(""), false, "empty: modelport turns it off");
  });
});
