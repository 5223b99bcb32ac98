// `modelport check`: verify every model (sha256, load, golden) without serving; exit 1 on
// any failure, so CI and deploy scripts can stop a bad model before it takes traffic.
import { Catalogue } from "../catalogue/catalogue.js";
import { ConfigError, loadConfig } from "../config/load.js";
import { parse, SERVE_OPTIONS, serveFlags } from "./args.js";
import { createLogger } from "./logger.js";

export const CHECK_HELP = `Usage: modelport check [MODEL] [-c FILE] [--sha256 HEX] [--golden FILE] [--json]

Loads each model, verifies its sha256 (config or NAME.manifest.json) and scores its golden
file (config or NAME.golden.json), then prints one line per model. Serves nothing.
Exit code: 0 when every model passes, 1 when any fails, 2 for a bad configuration.
`;

export async function check(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { ...SERVE_OPTIONS, json: { type: "boolean" } });
  if (values.help) {
    process.stdout.write(CHECK_HELP);
    return 0;
  }
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig({ file: values.config, modelPath: positionals[0], flags: serveFlags(values) });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`modelport: ${err.code}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(values["log-level"] ?? "warn", "auto", 2);
  const catalogue = new Catalogue(config, { log: logger });
  await catalogue.startAll();
  const statuses = catalogue.all().map((m) => m.status());
  await catalogue.closeAll();
  if (values.json) process.stdout.write(`${JSON.stringify({ models: statuses }, null, 2)}\n`);
  else {
    for (const s of statuses) {
      const detail = s.ready
        ? `ok    golden ${s.golden}, sha256 ${s.sha256?.slice(0, 12)}…, loaded in ${s.loadMs?.toFixed(1)} ms`
        : `FAIL  ${s.code}: ${s.reason}`;
      process.stdout.write(`${s.name.padEnd(20)} ${detail}\n`);
    }
  }
  return statuses.every((s) => s.ready) ? 0 : 1;
}
