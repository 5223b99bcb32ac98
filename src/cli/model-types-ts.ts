// The TypeScript source `modelport types` writes: from a server's GET /v1/models, one entry per
// tensor model in `export interface Models` (its inputs as nested arrays or {data, shape}, its
// rows, its JSON outputs, and its datatypes for predictTensors), so that
// createClient<Models>(...).model("m").predict(...) is checked by the compiler (docs/Client.md#types).
import { DATATYPES } from "../tensor.js";

/** One tensor as GET /v1/models/{m} declares it. */
export interface DeclaredTensor {
  name: string;
  datatype: string;
  shape?: number[];
}

/** The fields of a GET /v1/models answer that the generator reads. */
export interface ModelListing {
  data?: { id: string; kind?: string }[];
  models?: {
    name: string;
    version?: string;
    backend?: string;
    description?: string;
    inputs?: DeclaredTensor[];
    outputs?: DeclaredTensor[];
  }[];
}

/** Datatypes whose JSON elements are numbers: every one but BOOL and BYTES. */
const NUMERIC = new Set<string>(DATATYPES.filter((d) => d !== "BOOL" && d !== "BYTES"));

/** The JSON element type of a datatype: what a request may send, or what an answer holds. */
function element(datatype: string, side: "in" | "out"): string {
  if (NUMERIC.has(datatype)) return "number";
  if (datatype === "BOOL") return side === "in" ? "boolean | 0 | 1" : "boolean";
  if (datatype === "BYTES") return "string";
  return "unknown";
}

/** `rank` levels of arrays around `el` (readonly ones for inputs); unknown rank: any depth. */
function nested(el: string, rank: number | undefined, side: "in" | "out"): string {
  const wrap = (t: string) => (side === "in" ? `A<${t}>` : `${t.includes(" ") ? `(${t})` : t}[]`);
  if (rank === undefined) return side === "in" ? `Nested<${el}>` : `NestedOut<${el}>`;
  let t = el;
  for (let i = 0; i < rank; i++) t = wrap(t);
  return t;
}

const key = (name: string) => JSON.stringify(name);
/** Text safe inside a block comment. */
const comment = (text: string) => text.replace(/\*\//g, "*\\/").replace(/\s+/g, " ").trim();
const shapeText = (t: DeclaredTensor) => (t.shape ? `[${t.shape.join(", ")}]` : "(shape not declared)");

function modelEntry(m: NonNullable<ModelListing["models"]>[number]): string[] {
  const inputs = m.inputs ?? [];
  const outputs = m.outputs ?? [];
  const lines: string[] = [];
  const about = [m.backend, m.version ? `version ${m.version}` : undefined, m.description].filter(Boolean);
  lines.push(`  /** ${comment(about.join(", ") || m.name)} */`);
  lines.push(`  ${key(m.name)}: {`);
  if (inputs.length === 0) {
    // Not loaded (lazy, unloaded) or a handler without a signature: nothing to check against.
    lines.push("    /** The server did not declare this model's inputs (not loaded?): anything goes. */");
    lines.push("    inputs: Record<string, unknown>;");
    lines.push("    rows: A<unknown>;");
  } else {
    lines.push(
      "    /** For `{ inputs }`: nested arrays by the declared shape, or `{ data, shape }` flat. */",
    );
    lines.push("    inputs: {");
    for (const t of inputs) {
      const el = element(t.datatype, "in");
      lines.push(`      /** ${t.datatype} ${shapeText(t)} */`);
      lines.push(`      ${key(t.name)}: ${nested(el, t.shape?.length, "in")} | Flat<${el}>;`);
    }
    lines.push("    };");
    // Rows stack along dim 0: every input needs a rank of at least 1.
    const rowable = inputs.every((t) => t.shape === undefined || t.shape.length >= 1);
    if (!rowable) {
      lines.push("    /** An input has no batch dim (a scalar): send `{ inputs }`. */");
      lines.push("    rows: never;");
    } else {
      const rowOf = (t: DeclaredTensor) =>
        nested(element(t.datatype, "in"), t.shape === undefined ? undefined : t.shape.length - 1, "in");
      const objects = `A<{ ${inputs.map((t) => `${key(t.name)}: ${rowOf(t)}`).join("; ")} }>`;
      lines.push("    /** For `{ rows }`: one element per row (dim 0). */");
      lines.push(`    rows: ${inputs.length === 1 ? `A<${rowOf(inputs[0]!)}> | ${objects}` : objects};`);
    }
  }
  if (outputs.length === 0) lines.push("    outputs: Record<string, unknown>;");
  else {
    lines.push("    outputs: {");
    for (const t of outputs) {
      lines.push(`      /** ${t.datatype} ${shapeText(t)} */`);
      lines.push(`      ${key(t.name)}: ${nested(element(t.datatype, "out"), t.shape?.length, "out")};`);
    }
    lines.push("    };");
  }
  const names = (list: DeclaredTensor[]) =>
    list.length === 0
      ? "Record<string, Datatype>"
      : `{ ${list.map((t) => `${key(t.name)}: ${JSON.stringify(t.datatype)}`).join("; ")} }`;
  lines.push("    /** Datatypes, for predictTensors (typed arrays). */");
  lines.push(`    tensors: { inputs: ${names(inputs)}; outputs: ${names(outputs)} };`);
  lines.push("  };");
  return lines;
}

/** The whole generated file for a GET /v1/models answer read from `url`. */
export function modelTypesSource(listing: ModelListing, url: string): string {
  const models = [...(listing.models ?? [])].sort((a, b) => a.name.localeCompare(b.name));
  const tensorNames = new Set(models.map((m) => m.name));
  const language = (listing.data ?? [])
    .filter((d) => !tensorNames.has(d.id) && d.kind !== "tensor")
    .map((d) => d.id)
    .sort();
  const out = [
    `// Generated by \`modelport types ${comment(url)}\`: the models that server serves, for the typed`,
    "// client (createClient<Models>; docs/Client.md#types). Do not edit: run it again when the models change.",
    "",
    "/** Datatype names of the Open Inference Protocol. */",
    'export type Datatype = "BOOL" | "UINT8" | "UINT16" | "UINT32" | "UINT64" | "INT8" | "INT16" | "INT32" | "INT64" | "FP16" | "FP32" | "FP64" | "BYTES";',
    "type A<T> = readonly T[];",
    "/** Flat row-major data with its shape. */",
    "type Flat<T> = { data: A<T>; shape: A<number> };",
    "type Nested<T> = T | readonly Nested<T>[];",
    "type NestedOut<T> = T | NestedOut<T>[];",
    "",
    "export interface Models {",
    ...models.flatMap(modelEntry),
    "}",
    "",
    "/** Language models: call them with the openai SDK (baseURL: <server>/v1; docs/Client.md#language-models). */",
    `export type LanguageModel = ${language.length ? language.map((n) => JSON.stringify(n)).join(" | ") : "never"};`,
    "",
  ];
  return out.join("\n");
}
