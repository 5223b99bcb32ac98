// Every tensor ServedModel through one suite (test/conformance/served-model.conformance.ts): a
// local model in a worker thread, one in a child process, and the API tier's remote model
// forwarding to a real `--role runner` process; each built from config by the catalogue.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Catalogue } from "../../src/catalogue/catalogue.js";
import { loadConfig } from "../../src/config/load.js";
import { servedModelConformance } from "../conformance/served-model.conformance.js";
import { testModels } from "../helpers/models.js";
import { startChild, waitReady } from "../helpers/server.js";

const log = pino({ level: "silent" });

for (const placement of ["worker", "process"] as const) {
  servedModelConformance(`local, ${placement}`, async () => {
    const dir = await testModels();
    const config = loadConfig({ modelPath: join(dir, "churn-tree.onnx"), flags: { placement }, cores: 2 });
    const catalogue = new Catalogue(config, { log });
    await catalogue.startAll();
    return {
      model: catalogue.get("churn-tree"),
      golden: join(dir, "churn-tree.golden.json"),
      placement,
      cleanup: () => catalogue.closeAll(),
    };
  });
}

servedModelConformance("remote (API tier → runner process)", async () => {
  const dir = await testModels();
  const runner = await startChild([join(dir, "churn-tree.onnx"), "--role", "runner"]);
  await waitReady(runner.url, 60_000);
  const tmp = mkdtempSync(join(tmpdir(), "modelport-served-remote-"));
  const file = join(tmp, "modelport.yaml");
  writeFileSync(
    file,
    [
      "server:",
      "  role: api",
      "  runnerPollMs: 300",
      `  runners: [${runner.url}]`,
      "models:",
      `  - {name: churn-tree, path: ${join(dir, "churn-tree.onnx")}}`,
      "",
    ].join("\n"),
  );
  const catalogue = new Catalogue(loadConfig({ file, cores: 2 }), { log });
  await catalogue.startAll();
  return {
    model: catalogue.get("churn-tree"),
    golden: join(dir, "churn-tree.golden.json"),
    placement: "remote",
    cleanup: async () => {
      await catalogue.closeAll();
      await runner.stop();
    },
  };
});
