// The Dockerfile as far as it can be checked without a container engine: two stages, the
// runtime as the non-root uid the Kubernetes manifests run as, tini as PID 1, a HEALTHCHECK on
// /livez, only what the build produces copied in (and those paths exist after `npm run build`),
// the working folder the manifests mount writable, the image tag they name. Building and running
// the image is test/integration/container-image.test.ts, where an engine answers.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../helpers/server.js";

const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
// Instructions with their continuation lines joined, comments dropped.
const lines = dockerfile
  .replace(/\\\n/g, " ")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
const stages: string[][] = [];
for (const l of lines) {
  if (/^FROM\s/i.test(l)) stages.push([]);
  stages.at(-1)?.push(l);
}
const runtime = stages.at(-1)!;
const instr = (name: string) => runtime.filter((l) => l.toUpperCase().startsWith(`${name} `));

const manifests = ["api.yaml", "runner.yaml"].flatMap((f) =>
  parseAllDocuments(readFileSync(join(REPO_ROOT, "deploy", "kubernetes", f), "utf8")).map((d) => d.toJS()),
);
const pods = manifests.filter((m) => m?.kind === "Deployment").map((d) => d.spec.template.spec);

describe("Dockerfile", () => {
  it("builds in one stage and runs from another, as a non-root uid the manifests run as", () => {
    assert.ok(stages.length >= 2, "a build stage and a runtime stage");
    const user = instr("USER").at(-1);
    assert.ok(user, "the runtime sets USER");
    const uid = Number(user!.split(/\s+/)[1]!.split(":")[0]);
    assert.ok(uid > 0, "not root");
    assert.ok(pods.length >= 2);
    for (const pod of pods) assert.equal(pod.securityContext.runAsUser, uid);
  });

  it("runs modelport under tini, with a HEALTHCHECK on /livez", () => {
    assert.match(instr("ENTRYPOINT").join(" "), /tini.*"--".*\/app\/bin\/modelport\.js/);
    assert.match(instr("HEALTHCHECK").join(" "), /\/livez/);
    for (const pod of pods)
      assert.deepEqual(
        pod.containers[0].command,
        ["node", "/app/bin/modelport.js"],
        "the manifests run the image's entry",
      );
  });

  it("copies only build outputs and production dependencies into the runtime, all of which the build makes", () => {
    const copies = instr("COPY");
    assert.ok(copies.length > 0);
    for (const c of copies) {
      assert.match(c, /--from=build/, `${c}: everything comes from the build stage`);
      const src = c.split(/\s+/)[2]!;
      if (src === "/usr/local/bin/node") continue; // Node itself, for a base image without it
      const from = src.replace(/^\/src\/?/, "");
      if (from !== "node_modules")
        assert.ok(existsSync(join(REPO_ROOT, from)), `${from} exists after npm run build`);
    }
    assert.ok(!runtime.some((l) => /npm (ci|install)/.test(l)), "no install in the runtime stage");
    assert.match(stages[0]!.join("\n"), /npm prune --omit=dev/);
    // The install's lean step runs in `npm ci`: the script is there before it.
    assert.match(stages[0]!.join("\n"), /COPY bin\/lean-install\.js .*\nRUN npm ci/);
  });

  it("works from the folder the manifests mount writable, on a read-only root", () => {
    assert.equal(instr("WORKDIR").at(-1), "WORKDIR /var/lib/modelport");
    for (const pod of pods) {
      const mounts = pod.containers[0].volumeMounts.map((m: { mountPath: string }) => m.mountPath);
      assert.ok(mounts.includes("/var/lib/modelport") && mounts.includes("/tmp"), mounts.join(", "));
      assert.equal(pod.containers[0].securityContext.readOnlyRootFilesystem, true);
    }
  });

  it("builds the GPU image runner-gpu.yaml names from the build arguments its header gives", () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
    const gpu = parseAllDocuments(
      readFileSync(join(REPO_ROOT, "deploy", "kubernetes", "runner-gpu.yaml"), "utf8"),
    )
      .map((d) => d.toJS())
      .find((m) => m?.kind === "Deployment");
    const tag = `modelport:${version}-cuda`;
    assert.equal(gpu.spec.template.spec.containers[0].image, tag);
    const header = dockerfile
      .split("\n")
      .filter((l) => l.startsWith("#"))
      .join("\n")
      .replace(/\\\n#/g, " ");
    const command = header.match(new RegExp(`docker build -t ${tag}[^\n]*`))?.[0];
    assert.ok(command, `the Dockerfile's header shows how to build ${tag}`);
    const args = [...command!.matchAll(/--build-arg (\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!] as const);
    assert.deepEqual(args.map((a) => a[0]).sort(), [
      "MODELPORT_INSTALL",
      "ONNXRUNTIME_NODE_INSTALL",
      "RUNTIME_IMAGE",
    ]);
    // Each is declared where it is used: the runtime base before the first FROM, the install
    // switches in the build stage.
    assert.ok(lines.some((l) => /^ARG RUNTIME_IMAGE=node:\$\{NODE_VERSION\}-bookworm-slim$/.test(l)));
    assert.match(runtime[0]!, /^FROM \$\{RUNTIME_IMAGE\}$/);
    for (const a of ["ONNXRUNTIME_NODE_INSTALL", "MODELPORT_INSTALL"])
      assert.ok(
        stages[0]!.some((l) => l.startsWith(`ARG ${a}=`)),
        a,
      );
    assert.equal(new Map(args).get("MODELPORT_INSTALL"), "cuda");
  });

  it("is the image the manifests name, and its build context leaves local state out", () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8"));
    for (const pod of pods) assert.equal(pod.containers[0].image, `modelport:${version}`);
    const ignored = readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8").split("\n");
    for (const p of ["node_modules", "dist", ".modelport", "examples/models"])
      assert.ok(ignored.includes(p), p);
  });
});
