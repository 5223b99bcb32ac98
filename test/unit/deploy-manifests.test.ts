// The deployment files in deploy/: every Kubernetes manifest is a valid object of its kind
// (offline schemas from kubernetes-models and @kubernetes-models/keda), and the settings that
// tie them to modelport agree with modelport: probes on /livez and /readyz, the grace period
// above the drain, the model volume read-only, resources everywhere, and a modelport.yaml that
// passes modelport's own configuration schema.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { Redis } from "ioredis";
import { Deployment } from "kubernetes-models/apps/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Namespace, PersistentVolumeClaim, Secret, Service } from "kubernetes-models/v1";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { loadConfig } from "../../src/config/load.js";
import { configSchema } from "../../src/config/schema.js";
import { RedisJobStore } from "../../src/jobs/stores/redis-job-store.js";
import { newJob, T0 } from "../conformance/job-store.conformance.js";
import { deletePrefix, redisUrl, uniquePrefix } from "../helpers/redis.js";

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const DEPLOY = join(REPO_ROOT, "deploy");
const K8S = join(DEPLOY, "kubernetes");
const NAMESPACE = "modelport";
/**
 * The Redis job store keeps a model's runnable queued jobs in the sorted set `<prefix>q:<model>`
 * (default prefix "modelport:"); KEDA's redis scaler reads its length (ZCARD) to scale runners.
 */
const QUEUE_KEY_PREFIX = "modelport:q:";

// apiVersion/kind → the model whose validate() checks the object against the schema generated
// from the Kubernetes OpenAPI spec (or, for KEDA, from KEDA's CRD).
const MODELS: Record<string, new (data: any) => { validate(): void }> = {
  "v1/Namespace": Namespace,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "apps/v1/Deployment": Deployment,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};

// The Kubernetes schemas accept unknown fields (the API server drops them, or rejects them under
// strict field validation); a misspelt container field would otherwise pass silently.
const CONTAINER_FIELDS = new Set([
  "name",
  "image",
  "command",
  "args",
  "workingDir",
  "ports",
  "envFrom",
  "env",
  "resources",
  "resizePolicy",
  "restartPolicy",
  "volumeMounts",
  "volumeDevices",
  "livenessProbe",
  "readinessProbe",
  "startupProbe",
  "lifecycle",
  "terminationMessagePath",
  "terminationMessagePolicy",
  "imagePullPolicy",
  "securityContext",
  "stdin",
  "stdinOnce",
  "tty",
]);

interface Manifest {
  file: string;
  doc: any;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(e.name) ? [path] : [];
  });
}

function load(): { manifests: Manifest[]; kustomization: any } {
  const manifests: Manifest[] = [];
  let kustomization: any;
  for (const path of yamlFiles(K8S)) {
    const file = relative(K8S, path);
    for (const d of parseAllDocuments(readFileSync(path, "utf8"))) {
      assert.deepEqual(
        d.errors.map((e) => e.message),
        [],
        `${file}: YAML errors`,
      );
      const doc = d.toJS();
      if (doc === null || doc === undefined) continue;
      if (doc.kind === "Kustomization") kustomization = doc;
      else manifests.push({ file, doc });
    }
  }
  return { manifests, kustomization };
}

const { manifests, kustomization } = load();
const objects = (kind: string) => manifests.filter((m) => m.doc.kind === kind);
const byName = (kind: string, name: string) => {
  const m = objects(kind).find((o) => o.doc.metadata?.name === name);
  assert.ok(m, `no ${kind} named ${name}`);
  return m.doc;
};

/** The modelport.yaml a Deployment reads with -c, parsed by modelport's own schema. */
function modelportConfigOf(deployment: any) {
  const pod = deployment.spec.template.spec;
  const c = modelportContainer(deployment);
  const file = c.args[c.args.indexOf("-c") + 1] as string;
  assert.ok(file, `${deployment.metadata.name}: no -c FILE`);
  const mount = (c.volumeMounts ?? []).find((m: any) => file.startsWith(`${m.mountPath}/`));
  assert.ok(mount, `${deployment.metadata.name}: ${file} is on no volume mount`);
  const volume = pod.volumes.find((v: any) => v.name === mount.name);
  assert.ok(volume?.configMap, `${deployment.metadata.name}: ${file} is not from a ConfigMap`);
  const key = file.slice(mount.mountPath.length + 1);
  const text = byName("ConfigMap", volume.configMap.name).data?.[key];
  assert.equal(typeof text, "string", `ConfigMap ${volume.configMap.name} has no key ${key}`);
  const parsed = configSchema.safeParse(parseYaml(text));
  assert.ok(
    parsed.success,
    `ConfigMap ${volume.configMap.name}/${key}: ${parsed.success ? "" : JSON.stringify(parsed.error.issues)}`,
  );
  return parsed.data;
}

function modelportContainer(deployment: any): any {
  const c = deployment.spec.template.spec.containers.find((x: any) => x.name === "modelport");
  assert.ok(c, `${deployment.metadata.name}: no container named modelport`);
  return c;
}

const modelportDeployments = () =>
  objects("Deployment")
    .map((m) => m.doc)
    .filter((d) => d.spec.template.spec.containers.some((c: any) => c.name === "modelport"));

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

describe("deploy/kubernetes", () => {
  it("every document is a valid Kubernetes object of a known kind, in the modelport namespace", () => {
    assert.ok(manifests.length >= 10, `only ${manifests.length} manifests found`);
    for (const { file, doc } of manifests) {
      const id = `${file}: ${doc.kind} ${doc.metadata?.name}`;
      const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      assert.ok(Model, `${id}: no schema for ${doc.apiVersion}/${doc.kind}`);
      assert.doesNotThrow(() => new Model(doc).validate(), id);
      if (doc.kind === "Namespace") assert.equal(doc.metadata.name, NAMESPACE);
      else assert.equal(doc.metadata?.namespace, NAMESPACE, `${id}: namespace`);
    }
  });

  it("the validator does reject a broken object (the schemas are really applied)", () => {
    const broken = structuredClone(byName("Deployment", "modelport-api"));
    broken.spec.replicas = "two";
    delete broken.spec.template.spec.containers[0].name;
    assert.throws(() => new Deployment(broken).validate(), /replicas must be integer/);
    const so = structuredClone(byName("ScaledObject", "modelport-runner"));
    delete so.spec.scaleTargetRef.name;
    assert.throws(() => new ScaledObject(so).validate(), /scaleTargetRef must have required property name/);
  });

  it("the kustomization lists files that exist, and every manifest file is listed or offered", () => {
    assert.ok(kustomization, "no kustomization.yaml");
    assert.equal(kustomization.namespace, NAMESPACE);
    const files = new Set(manifests.map((m) => m.file));
    for (const r of kustomization.resources) assert.ok(files.has(r), `kustomization: ${r} has no manifests`);
    const text = readFileSync(join(K8S, "kustomization.yaml"), "utf8");
    for (const f of files) {
      assert.ok(
        kustomization.resources.includes(f) || new RegExp(`#\\s*-\\s*${f.replace(".", "\\.")}`).test(text),
        `${f} is neither a resource nor a commented-out one in kustomization.yaml`,
      );
    }
  });

  it("every container sets only known fields and has CPU and memory requests", () => {
    for (const { file, doc } of objects("Deployment")) {
      const pod = doc.spec.template.spec;
      for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
        const id = `${file}: ${doc.metadata.name}/${c.name}`;
        for (const k of Object.keys(c)) assert.ok(CONTAINER_FIELDS.has(k), `${id}: unknown field ${k}`);
        assert.ok(c.resources?.requests?.cpu, `${id}: no CPU request`);
        assert.ok(c.resources?.requests?.memory, `${id}: no memory request`);
        assert.ok(c.resources?.limits?.memory, `${id}: no memory limit`);
      }
    }
  });

  it("every pod runs non-root with a read-only root filesystem", () => {
    for (const { file, doc } of objects("Deployment")) {
      const pod = doc.spec.template.spec;
      for (const c of pod.containers) {
        const id = `${file}: ${doc.metadata.name}/${c.name}`;
        assert.ok(
          pod.securityContext?.runAsNonRoot || c.securityContext?.runAsNonRoot,
          `${id}: runAsNonRoot`,
        );
        assert.equal(c.securityContext?.readOnlyRootFilesystem, true, `${id}: readOnlyRootFilesystem`);
        assert.equal(c.securityContext?.allowPrivilegeEscalation, false, `${id}: allowPrivilegeEscalation`);
        assert.deepEqual(c.securityContext?.capabilities?.drop, ["ALL"], `${id}: capabilities`);
      }
    }
  });

  it("modelport deployments: the ConfigMap's modelport.yaml passes modelport's config schema", () => {
    const deployments = modelportDeployments();
    assert.deepEqual(deployments.map((d) => d.metadata.name).sort(), [
      "modelport-api",
      "modelport-runner",
      "modelport-runner-gpu",
    ]);
    for (const d of deployments) {
      const config = modelportConfigOf(d);
      assert.equal(
        config.server.host,
        "0.0.0.0",
        `${d.metadata.name}: must listen beyond the pod's loopback`,
      );
      assert.equal(config.server.processes, 1, `${d.metadata.name}: scale with replicas, not processes`);
    }
  });

  it("modelport deployments: probes on /livez and /readyz at modelport's port, a generous startup probe", () => {
    for (const d of modelportDeployments()) {
      const config = modelportConfigOf(d);
      const c = modelportContainer(d);
      const port = c.ports.find((p: any) => p.containerPort === config.server.port);
      assert.ok(port, `${d.metadata.name}: no container port ${config.server.port}`);
      const probe = (name: string, path: string) => {
        const p = c[name];
        assert.ok(p?.httpGet, `${d.metadata.name}: no HTTP ${name}`);
        assert.equal(p.httpGet.path, path, `${d.metadata.name}: ${name} path`);
        assert.ok(
          p.httpGet.port === port.containerPort || (port.name && p.httpGet.port === port.name),
          `${d.metadata.name}: ${name} port ${p.httpGet.port} is not modelport's ${config.server.port}`,
        );
        return p;
      };
      const startup = probe("startupProbe", "/livez");
      probe("livenessProbe", "/livez");
      probe("readinessProbe", "/readyz");
      assert.ok(
        (startup.periodSeconds ?? 10) * (startup.failureThreshold ?? 3) >= 120,
        `${d.metadata.name}: the startup probe must allow at least 2 minutes for loading`,
      );
    }
  });

  it("modelport deployments: grace period > preStop sleep + drainTimeoutMs", () => {
    for (const d of modelportDeployments()) {
      const config = modelportConfigOf(d);
      const c = modelportContainer(d);
      const cmd = c.lifecycle?.preStop?.exec?.command as string[] | undefined;
      assert.ok(cmd && cmd[0] === "sleep", `${d.metadata.name}: preStop is not a sleep`);
      const sleep = Number(cmd[1]);
      assert.ok(sleep >= 3 && sleep <= 10, `${d.metadata.name}: preStop sleep ${cmd[1]}`);
      const grace = d.spec.template.spec.terminationGracePeriodSeconds ?? 30;
      assert.ok(
        grace > config.server.drainTimeoutMs / 1000 + sleep,
        `${d.metadata.name}: terminationGracePeriodSeconds ${grace} <= ${config.server.drainTimeoutMs / 1000} s drain + ${sleep} s preStop`,
      );
    }
  });

  it("modelport deployments: roles, /tmp on an emptyDir, REDIS_URL", () => {
    for (const d of modelportDeployments()) {
      const pod = d.spec.template.spec;
      const c = modelportContainer(d);
      const role = c.args[c.args.indexOf("--role") + 1];
      assert.equal(c.args[0], "serve");
      assert.equal(role, d.metadata.name === "modelport-api" ? "api" : "runner", `${d.metadata.name}: role`);
      const tmp = c.volumeMounts.find((m: any) => m.mountPath === "/tmp");
      assert.ok(tmp, `${d.metadata.name}: /tmp is not mounted`);
      assert.ok(pod.volumes.find((v: any) => v.name === tmp.name)?.emptyDir, `${d.metadata.name}: /tmp`);
      const redis = c.env.find((e: any) => e.name === "REDIS_URL");
      assert.match(redis?.value ?? "", /^redis:\/\/modelport-redis\./);
    }
  });

  it("the API tier finds the runners through their headless Services, as `serve --role api` reads them", () => {
    const api = modelportContainer(byName("Deployment", "modelport-api"));
    const runners = api.env.find((e: any) => e.name === "MODELPORT_RUNNERS")?.value as string;
    assert.ok(runners, "modelport-api: MODELPORT_RUNNERS");
    const flags = { role: "api" };
    const config = loadConfig({
      modelPath: join(REPO_ROOT, "package.json"),
      flags,
      env: { MODELPORT_RUNNERS: runners },
    });
    assert.deepEqual(config.server.runners, runners.split(","));
    for (const url of config.server.runners) {
      const u = new URL(url.replace(/^dns\+/, ""));
      assert.match(url, /^dns\+http:\/\//, `${url}: one runner per pod, not kube-proxy's random pick`);
      const [name, namespace] = u.hostname.split(".");
      const service = byName("Service", name!);
      assert.equal(service.metadata.namespace, namespace);
      assert.equal(service.spec.clusterIP, "None", `${name} must be headless: one address per ready pod`);
      assert.equal(String(service.spec.ports[0].port), u.port);
      const deployment = modelportDeployments().find((d) =>
        matches(service.spec.selector, d.spec.template.metadata.labels),
      );
      assert.ok(deployment, `${name} selects a runner Deployment`);
      const c = modelportContainer(deployment);
      assert.equal(c.args[c.args.indexOf("--role") + 1], "runner");
    }
    for (const d of modelportDeployments()) {
      const id = modelportContainer(d).env.find((e: any) => e.name === "MODELPORT_INSTANCE_ID");
      assert.equal(id?.valueFrom?.fieldRef?.fieldPath, "metadata.name", `${d.metadata.name}: instance id`);
    }
  });

  it("runners: the models come read-only from the modelport-models claim, and every model is under it", () => {
    byName("PersistentVolumeClaim", "modelport-models");
    const runners = modelportDeployments().filter((d) => d.metadata.name !== "modelport-api");
    for (const d of runners) {
      const pod = d.spec.template.spec;
      const mount = modelportContainer(d).volumeMounts.find((m: any) => m.mountPath === "/models");
      assert.ok(mount, `${d.metadata.name}: /models not mounted`);
      assert.equal(mount.readOnly, true, `${d.metadata.name}: /models must be read-only`);
      const volume = pod.volumes.find((v: any) => v.name === mount.name);
      assert.equal(volume?.persistentVolumeClaim?.claimName, "modelport-models");
      assert.equal(volume.persistentVolumeClaim.readOnly, true);
      for (const m of modelportConfigOf(d).models) {
        assert.ok(m.path.startsWith("/models/"), `${d.metadata.name}: ${m.name} is not on the models volume`);
      }
    }
  });

  it("the GPU runner asks for one GPU, lands on GPU nodes and runs its models on cuda", () => {
    const d = byName("Deployment", "modelport-runner-gpu");
    const pod = d.spec.template.spec;
    const c = modelportContainer(d);
    assert.equal(String(c.resources.limits["nvidia.com/gpu"]), "1");
    assert.ok(Object.keys(pod.nodeSelector ?? {}).length > 0, "nodeSelector");
    assert.ok(
      pod.tolerations?.some((t: any) => t.key === "nvidia.com/gpu"),
      "toleration for nvidia.com/gpu",
    );
    for (const m of modelportConfigOf(d).models) assert.equal(m.device, "cuda", m.name);
    // The CPU runner does not take a GPU.
    assert.equal(
      modelportContainer(byName("Deployment", "modelport-runner")).resources.limits["nvidia.com/gpu"],
      undefined,
    );
  });

  it("services, PDBs and autoscalers point at pods and deployments that exist", () => {
    const deployments = objects("Deployment").map((m) => m.doc);
    const podsOf = (selector: Record<string, string>) =>
      deployments.filter((d) => matches(selector, d.spec.template.metadata.labels));
    for (const { doc } of objects("Service")) {
      const targets = podsOf(doc.spec.selector);
      assert.equal(targets.length, 1, `Service ${doc.metadata.name} selects ${targets.length} deployments`);
      const ports = targets[0].spec.template.spec.containers.flatMap((c: any) => c.ports ?? []);
      for (const p of doc.spec.ports) {
        assert.ok(
          ports.some((cp: any) => cp.name === p.targetPort || cp.containerPort === p.targetPort),
          `Service ${doc.metadata.name}: targetPort ${p.targetPort}`,
        );
      }
    }
    for (const { doc } of objects("PodDisruptionBudget")) {
      assert.equal(podsOf(doc.spec.selector.matchLabels).length, 1, `PDB ${doc.metadata.name}`);
    }
    for (const d of ["modelport-api", "modelport-runner"]) {
      const labels = byName("Deployment", d).spec.template.metadata.labels;
      assert.ok(
        objects("PodDisruptionBudget").some((p) => matches(p.doc.spec.selector.matchLabels, labels)),
        `${d} has no PDB`,
      );
    }
    const hpa = byName("HorizontalPodAutoscaler", "modelport-api");
    assert.equal(hpa.spec.scaleTargetRef.name, "modelport-api");
    assert.ok(hpa.spec.metrics.some((m: any) => m.type === "Resource" && m.resource.name === "cpu"));
    assert.ok(hpa.spec.minReplicas >= 2, "the API keeps 2 pods for its PDB");
    for (const { doc } of objects("ScaledObject")) {
      byName("Deployment", doc.spec.scaleTargetRef.name);
    }
  });

  it("runner autoscaling: one KEDA redis trigger per model, on the Redis store's queue key modelport:q:<model>", () => {
    for (const so of objects("ScaledObject").map((m) => m.doc)) {
      const target = byName("Deployment", so.spec.scaleTargetRef.name);
      assert.equal(target.spec.replicas, undefined, `${target.metadata.name}: replicas are KEDA's`);
      const models = modelportConfigOf(target).models.map((m) => m.name);
      const keys = so.spec.triggers.map((t: any) => {
        assert.equal(t.type, "redis");
        assert.match(t.metadata.address, /^modelport-redis\.modelport\.svc\.cluster\.local:6379$/);
        assert.ok(Number(t.metadata.listLength) > 0);
        return t.metadata.listName;
      });
      assert.deepEqual(keys.sort(), models.map((m) => `${QUEUE_KEY_PREFIX}${m}`).sort(), so.metadata.name);
      // No HPA of ours fights KEDA's over the same deployment.
      assert.ok(
        !objects("HorizontalPodAutoscaler").some(
          (h) => h.doc.spec.scaleTargetRef.name === target.metadata.name,
        ),
      );
    }
  });
});

describe("the runner autoscaling key matches the Redis job store", () => {
  // KEDA's redis scaler counts the trigger's key by its type (ZCARD for a sorted set, LLEN for a
  // list, 0 for a missing key); this script does the same, so the test reads what KEDA would read.
  const KEDA_LENGTH = `local t = redis.call('type', KEYS[1]).ok
local count = {zset = 'zcard', set = 'scard', list = 'llen', hash = 'hlen', none = 'llen'}
return redis.call(count[t], KEYS[1])`;

  it("the store's default prefix is modelport:, so the triggers' keys are its queues", async () => {
    const store = await RedisJobStore.open(await redisUrl());
    try {
      assert.equal(`${store.prefix}q:`, QUEUE_KEY_PREFIX);
    } finally {
      await store.close();
    }
  });

  it("KEDA's count of <prefix>q:<model> is the model's runnable queued jobs, through the real store", async () => {
    // A prefix of its own on the shared Redis; the layout under it is the default prefix's.
    const url = await redisUrl();
    const prefix = uniquePrefix("keda");
    const store = await RedisJobStore.open(url, { prefix });
    const redis = new Redis(url, { maxRetriesPerRequest: 1 });
    const count = async (model: string) => Number(await redis.eval(KEDA_LENGTH, 1, `${prefix}q:${model}`));
    try {
      assert.equal(await count("churn"), 0);
      for (let i = 0; i < 3; i++) await store.create(newJob({ model: "churn" }), T0 + i);
      await store.create(newJob({ model: "other" }), T0);
      assert.equal(await count("churn"), 3);
      assert.equal(await count("other"), 1);
      // A claimed job is no longer waiting; one waiting out a retry backoff is not runnable.
      const claimed = await store.claim("w", ["churn"], 60_000, T0 + 10);
      assert.ok(claimed);
      assert.equal(await count("churn"), 2);
      assert.ok(await store.fail(claimed.id, "w", { code: "X", message: "x" }, T0 + 60_000, T0 + 11));
      assert.equal(await count("churn"), 2);
      const second = await store.claim("w", ["churn"], 60_000, T0 + 12);
      assert.ok(second && second.id !== claimed.id);
      assert.equal(await count("churn"), 1);
    } finally {
      await store.close();
      await redis.quit();
      await deletePrefix(url, prefix);
    }
  });
});

describe("deploy/nginx and deploy/systemd agree with modelport's configuration", () => {
  const config = modelportConfigOf(byName("Deployment", "modelport-api"));

  it("nginx: client_max_body_size = limits.maxBodyBytes; SSE unbuffered; WebSocket upgrade; request ids", () => {
    const conf = readFileSync(join(DEPLOY, "nginx", "modelport.conf"), "utf8");
    assert.equal(Number(/client_max_body_size\s+(\d+);/.exec(conf)?.[1]), config.limits.maxBodyBytes);
    assert.match(conf, /proxy_http_version 1\.1;/);
    assert.match(conf, /keepalive \d+;/);
    assert.match(conf, /location ~ \^\/v1\/jobs\/\[\^\/\]\+\/events\$ \{[^}]*proxy_buffering off;/);
    assert.match(conf, /location = \/v1\/jobs\/ws \{[^}]*proxy_set_header Upgrade \$http_upgrade;/);
    assert.match(conf, /\$request_id/);
    assert.doesNotMatch(conf, /proxy_ignore_headers[^;]*X-Accel-Buffering/);
    // Balanced braces: a cheap sanity check where `nginx -t` is not available.
    const code = conf.replace(/#.*$/gm, "");
    assert.equal((code.match(/\{/g) ?? []).length, (code.match(/\}/g) ?? []).length);
  });

  it("systemd: SIGTERM to the main process, TimeoutStopSec above the drain, keys from an EnvironmentFile", () => {
    const unit = readFileSync(join(DEPLOY, "systemd", "modelport.service"), "utf8");
    const value = (key: string) => new RegExp(`^${key}=(.*)$`, "m").exec(unit)?.[1];
    assert.equal(value("KillSignal"), "SIGTERM");
    assert.equal(value("KillMode"), "mixed");
    assert.equal(value("Restart"), "on-failure");
    assert.ok(Number(value("TimeoutStopSec")) > config.server.drainTimeoutMs / 1000 + 5);
    assert.ok(value("EnvironmentFile"));
    assert.match(value("ExecStart") ?? "", / serve .*-c \/etc\/modelport\/modelport\.yaml/);
  });
});
