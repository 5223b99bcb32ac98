// Reading a model repository's folders: which versions a policy keeps, which file is a
// version's model, and what is reported (not thrown) when a folder or model.yaml is wrong.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { compareVersions, scanRepository, wantedVersions } from "../../src/catalogue/repository.js";
import { loadConfig } from "../../src/config/load.js";
import { tempRepository, writeModelSettings, writeScaleVersion } from "../helpers/repository.js";

const ctx = () => {
  const dir = tempRepository();
  writeScaleVersion(dir, "seed", "1", { k: 1 });
  return loadConfig({ flags: { repository: dir }, cores: 2 });
};

describe("model repository scanning", () => {
  it("orders versions numerically and applies latest, specific and all", () => {
    assert.deepEqual(["10", "9", "100", "2"].sort(compareVersions), ["2", "9", "10", "100"]);
    const versions = ["1", "2", "10", "3"];
    assert.deepEqual(wantedVersions({ latest: 1 }, versions), ["10"]);
    assert.deepEqual(wantedVersions({ latest: 2 }, versions), ["3", "10"]);
    assert.deepEqual(wantedVersions({ latest: 9 }, versions), ["1", "2", "3", "10"]);
    assert.deepEqual(wantedVersions({ specific: ["2", "7"] }, versions), ["2"]);
    assert.deepEqual(wantedVersions("all", versions), ["1", "2", "3", "10"]);
  });

  it("resolves each version's model, golden file and settings; reports what it cannot use", () => {
    const config = ctx();
    const dir = config.repository!.dir;
    writeModelSettings(dir, "seed", "versionPolicy: all\nthreads: 1\nbatching: { maxDelayMs: 7 }\n");
    writeScaleVersion(dir, "seed", "2", { k: 2 });
    mkdirSync(join(dir, "seed", "not-a-version"));
    // Two model files and no model.*: ambiguous.
    mkdirSync(join(dir, "seed", "3"));
    writeFileSync(join(dir, "seed", "3", "a.onnx"), "x");
    writeFileSync(join(dir, "seed", "3", "b.onnx"), "x");
    mkdirSync(join(dir, "seed", "4"));
    writeModelSettings(dir, "broken", "versionPolicy: { newest: 1 }\n");
    writeScaleVersion(dir, "broken", "1", { k: 1 });
    mkdirSync(join(dir, "no way"));

    const scan = scanRepository(dir, config);
    assert.deepEqual(scan.problems.length, 1);
    assert.match(scan.problems[0]!, /no way: not a model name/);
    const seed = scan.models.find((m) => m.name === "seed")!;
    assert.equal(seed.policy, "all");
    assert.deepEqual(
      seed.versions.map((v) => v.version),
      ["1", "2", "3", "4"],
    );
    const [v1, v2, v3, v4] = seed.versions;
    assert.equal(v1!.config?.backend, "custom");
    assert.equal(v2!.config?.golden, join(dir, "seed", "2", "model.golden.json"));
    assert.equal(v2!.config?.version, "2");
    assert.equal((v2!.config as { batching: { maxDelayMs: number } }).batching.maxDelayMs, 7);
    assert.match(v3!.problems[0]!, /several model files \(a\.onnx, b\.onnx\)/);
    assert.match(v4!.problems[0]!, /no model file/);
    const broken = scan.models.find((m) => m.name === "broken")!;
    assert.match(broken.problems[0]!, /model\.yaml: versionPolicy/);
    assert.equal(broken.versions[0]!.config, undefined);
  });

  it("a changed file changes the fingerprint; an untouched folder keeps it", () => {
    const config = ctx();
    const dir = config.repository!.dir;
    const before = scanRepository(dir, config).models[0]!.versions[0]!.fingerprint;
    assert.equal(scanRepository(dir, config).models[0]!.versions[0]!.fingerprint, before);
    writeFileSync(join(dir, "seed", "1", "notes.txt"), "changed");
    assert.notEqual(scanRepository(dir, config).models[0]!.versions[0]!.fingerprint, before);
  });

  it("the config needs models or a repository, and the repository folder must exist", () => {
    assert.throws(
      () => loadConfig({ flags: { repository: "/nonexistent/repo" }, cores: 2 }),
      /does not exist/,
    );
  });
});
