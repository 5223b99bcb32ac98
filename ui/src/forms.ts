// The "try it" form's logic, pure and DOM-free (unit-tested in test/unit/ui-metrics.test.ts): a
// text field per model input with a default that validates, the field read back into a value of
// the input's datatype, and the predict body (`rows` of one item when every input has a batch
// dim, named `inputs` otherwise; docs/API.md). Plus the Server-Sent Events splitter for the chat.

export interface TensorSpec {
  name: string;
  datatype: string;
  shape?: number[];
  description?: string;
}

const NUMERIC = /^(FP|INT|UINT|BF)/;

/** The choices a BYTES input's description lists as `a | b | c`, if it does. */
export function choices(spec: TensorSpec): string[] | undefined {
  if (spec.datatype !== "BYTES" || !spec.description?.includes(" | ")) return undefined;
  return spec.description.split(" | ").map((s) => s.trim());
}

/** Whether every input takes a batch of rows (a leading dim of -1). */
export function batchable(inputs: readonly TensorSpec[]): boolean {
  return inputs.length > 0 && inputs.every((s) => (s.shape ?? [])[0] === -1);
}

/** The dims of one value of the input: without the batch dim in row form; -1 becomes 1. */
export function itemDims(spec: TensorSpec, rows: boolean): number[] {
  const shape = spec.shape ?? [];
  return (rows ? shape.slice(1) : shape).map((d) => (d > 0 ? d : 1));
}

function scalarDefault(spec: TensorSpec): string {
  if (spec.datatype === "BOOL") return "false";
  if (spec.datatype === "BYTES") return choices(spec)?.[0] ?? "text";
  return "0";
}

/**
 * The field's starting text: a scalar as is, a vector as comma-separated values, anything
 * deeper (or a BYTES vector) as JSON.
 */
export function defaultText(spec: TensorSpec, rows: boolean): string {
  const dims = itemDims(spec, rows);
  const scalar = scalarDefault(spec);
  if (dims.length === 0) return scalar;
  if (dims.length === 1 && spec.datatype !== "BYTES") return new Array(dims[0]).fill(scalar).join(", ");
  const leaf: unknown = spec.datatype === "BYTES" ? scalar : JSON.parse(scalar);
  let value: unknown = leaf;
  for (let i = dims.length - 1; i >= 0; i--) value = new Array(dims[i]).fill(value);
  return JSON.stringify(value);
}

function scalarValue(spec: TensorSpec, text: string): unknown {
  const t = text.trim();
  if (spec.datatype === "BYTES") return text;
  if (spec.datatype === "BOOL") {
    if (t === "true" || t === "1") return true;
    if (t === "false" || t === "0") return false;
    throw new Error(`${spec.name}: true or false, not "${t}"`);
  }
  if (NUMERIC.test(spec.datatype)) {
    const n = Number(t);
    if (t === "" || !Number.isFinite(n)) throw new Error(`${spec.name}: a number, not "${t}"`);
    return n;
  }
  return t;
}

/** The field's text read back as a value of the input (throws a message naming the input). */
export function parseField(spec: TensorSpec, text: string, rows: boolean): unknown {
  const dims = itemDims(spec, rows);
  if (dims.length === 0) return scalarValue(spec, text);
  const t = text.trim();
  if (t.startsWith("[")) {
    try {
      return JSON.parse(t);
    } catch {
      throw new Error(`${spec.name}: not valid JSON`);
    }
  }
  if (dims.length === 1) return t.split(",").map((part) => scalarValue(spec, part));
  throw new Error(`${spec.name}: a JSON array of shape [${dims.join(", ")}]`);
}

/** The body for POST /v1/models/{m}/predict from the fields' texts (by input name). */
export function predictBody(inputs: readonly TensorSpec[], texts: Record<string, string>): unknown {
  const rows = batchable(inputs);
  const values = Object.fromEntries(
    inputs.map((s) => [s.name, parseField(s, texts[s.name] ?? defaultText(s, rows), rows)]),
  );
  return rows ? { rows: [values] } : { inputs: values };
}

/**
 * Splits Server-Sent Events text: the `data:` payloads of every complete event in `buffer`, and
 * what is left of an event not yet complete.
 */
export function sseEvents(buffer: string): { data: string[]; rest: string } {
  const text = buffer.replace(/\r\n/g, "\n");
  const parts = text.split("\n\n");
  const rest = parts.pop() ?? "";
  const data: string[] = [];
  for (const event of parts) {
    const lines = event
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""));
    if (lines.length > 0) data.push(lines.join("\n"));
  }
  return { data, rest };
}
