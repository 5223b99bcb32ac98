// `modelport types URL`: reads a running server's GET /v1/models and prints a TypeScript file
// declaring each tensor model's inputs, rows and outputs, for the typed client
// (`createClient<Models>`; the file's text comes from model-types-ts.ts).
import { writeFileSync } from "node:fs";
import { parse, UsageError } from "./args.js";
import { type ModelListing, modelTypesSource } from "./model-types-ts.js";

export const TYPES_HELP = `Usage: modelport types [URL] [options] > models.ts

Reads URL/v1/models of a running modelport (default http://127.0.0.1:8080) and prints a
TypeScript file: \`export interface Models\` with, per tensor model, its inputs (nested arrays by
shape, or {data, shape}), its rows, its outputs and its datatypes, and \`LanguageModel\`, the
names of its language models. Give it to the client so model names, input names and output
names are checked by the compiler (docs/Client.md#types):

  import { createClient } from "modelport/client";
  import type { Models } from "./models.js";
  const client = createClient<Models>({ baseUrl: "http://127.0.0.1:8080" });
  await client.model("churn-tree").predict({ rows: [[3, 95, 4, 1, 0, 20]] });

Models not loaded at the time (lazy, unloaded) have no declared inputs and get loose types.

Options:
      --url URL          the server's base URL (same as the positional URL)
      --api-key KEY      bearer key, when the server has API keys on (or MODELPORT_API_KEY)
  -o, --out FILE         write the file there instead of to standard output
  -h, --help             show this help

Exit status: 0 on success; 1 when the server cannot be read; 2 on a usage error.
`;

const TYPES_OPTIONS = {
  url: { type: "string" },
  "api-key": { type: "string" },
  out: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const;

export async function types(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, TYPES_OPTIONS);
  if (values.help) {
    process.stdout.write(TYPES_HELP);
    return 0;
  }
  if (positionals.length > 1) throw new UsageError(`types takes one URL, got ${positionals.join(" ")}`);
  const base = (values.url ?? positionals[0] ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
  if (!/^https?:\/\//.test(base)) throw new UsageError(`'${base}' is not an http(s) URL`);
  const key = values["api-key"] ?? process.env.MODELPORT_API_KEY;
  let listing: ModelListing;
  try {
    const res = await fetch(`${base}/v1/models`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    if (!res.ok) {
      const body = (await res.json().catch(() => undefined)) as { error?: { message?: string } } | undefined;
      process.stderr.write(
        `modelport types: ${base}/v1/models answered HTTP ${res.status}${body?.error?.message ? `: ${body.error.message}` : ""}\n`,
      );
      return 1;
    }
    listing = (await res.json()) as ModelListing;
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message;
    process.stderr.write(`modelport types: cannot read ${base}/v1/models: ${cause}\n`);
    return 1;
  }
  if (!Array.isArray(listing.models)) {
    process.stderr.write(
      `modelport types: ${base}/v1/models has no "models" list: is it a modelport server?\n`,
    );
    return 1;
  }
  const source = modelTypesSource(listing, base);
  // Source code the user asked for, meant for their project: the umask decides its mode.
  if (values.out) writeFileSync(values.out, source);
  else process.stdout.write(source);
  return 0;
}
