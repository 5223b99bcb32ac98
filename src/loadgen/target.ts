// What a load test sends, and the checks before it starts: request bodies built from a model's
// declared inputs or its golden example, headers from the command line, and a trial request
// that turns "connection refused" into a clear message instead of a run full of errors.
import { readFileSync } from "node:fs";
import type { GoldenFile, GoldenTensor } from "../golden.js";
import { type Datatype, elementCount, type TensorSpec } from "../tensor.js";
import type { Target } from "./load.js";

/** A problem that stops a load test before it starts (unreachable URL, unknown model, bad body). */
export class LoadgenError extends Error {
  override name = "LoadgenError";
}

/**
 * `--body`: inline text, or `@FILE` for a file's bytes as they are (a binary tensor body, such as
 * an OIP request with Inference-Header-Content-Length, is sent unchanged).
 */
export function readBodyArg(arg: string): string | Buffer {
  if (!arg.startsWith("@")) return arg;
  const file = arg.slice(1);
  try {
    return readFileSync(file);
  } catch (err) {
    throw new LoadgenError(`--body ${arg}: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`);
  }
}

/** `--header K:V` (repeatable) into a header map; names are lower-cased. */
export function parseHeaders(list: readonly string[]): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const h of list) {
    const i = h.indexOf(":");
    if (i <= 0) throw new LoadgenError(`--header '${h}': expected NAME:VALUE`);
    headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
  }
  return headers;
}

/** A network error's reason in words, from fetch's error cause (ECONNREFUSED and friends). */
function networkReason(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? (err as NodeJS.ErrnoException).code;
  const words: Record<string, string> = {
    ECONNREFUSED: "connection refused: nothing listens there",
    ENOTFOUND: "host not found",
    EAI_AGAIN: "host name lookup failed",
    ECONNRESET: "connection reset by the server",
    EHOSTUNREACH: "host unreachable",
    ETIMEDOUT: "connection timed out",
    UND_ERR_CONNECT_TIMEOUT: "connection timed out",
  };
  if (code && words[code]) return `${words[code]} (${code})`;
  if ((err as Error).name === "TimeoutError") return "no answer within 10 s";
  return cause?.message ?? (err as Error).message;
}

/** Sends `target`'s request once; throws LoadgenError when the server cannot be reached. */
export async function trialRequest(target: Target): Promise<{ status: number; text: string }> {
  let res: Response;
  try {
    res = await fetch(target.url, {
      method: target.method,
      headers: target.headers,
      ...(target.body !== undefined
        ? { body: typeof target.body === "string" ? target.body : new Uint8Array(target.body) }
        : {}),
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    throw new LoadgenError(
      `cannot reach ${target.url}: ${networkReason(err)}. Is the server running, and is the URL right?`,
    );
  }
  return { status: res.status, text: await res.text() };
}

/** What GET /v1/models/{model} says about a model (the parts a load test needs). */
export interface ModelDescription {
  name: string;
  inputs: TensorSpec[];
  batchable: boolean;
  ready: boolean;
}

/** Asks a modelport server at `baseUrl` about `model`. */
export async function describeRemoteModel(
  baseUrl: string,
  model: string,
  headers: Record<string, string>,
): Promise<ModelDescription> {
  const url = `${baseUrl}/v1/models/${encodeURIComponent(model)}`;
  const { status, text } = await trialRequest({ url, method: "GET", headers });
  if (status === 404) {
    let served = "";
    try {
      const list = await trialRequest({ url: `${baseUrl}/v1/models`, method: "GET", headers });
      const names = (JSON.parse(list.text) as { models: { name: string }[] }).models.map((m) => m.name);
      served = ` (it serves: ${names.join(", ") || "none"})`;
    } catch {}
    throw new LoadgenError(`${baseUrl} serves no model '${model}'${served}`);
  }
  if (status !== 200) throw new LoadgenError(`GET ${url} answered ${status}: ${text.slice(0, 300)}`);
  let body: { name?: string; inputs?: TensorSpec[]; batchable?: boolean; status?: { ready?: boolean } };
  try {
    body = JSON.parse(text);
  } catch {
    throw new LoadgenError(`GET ${url} did not answer JSON; is ${baseUrl} a modelport server?`);
  }
  if (!Array.isArray(body.inputs)) throw new LoadgenError(`GET ${url} lists no inputs; is it modelport?`);
  return {
    name: body.name ?? model,
    inputs: body.inputs,
    batchable: body.batchable === true,
    ready: body.status?.ready === true,
  };
}

/**
 * The value used for every element when a body is built from the declared inputs alone:
 * 0.5 for floats (mid-range for normalized features), 1 for integers (a valid index or count),
 * false for BOOL, "a" for BYTES.
 */
function placeholder(datatype: Datatype): number | boolean | string {
  if (datatype === "BOOL") return false;
  if (datatype === "BYTES") return "a";
  if (datatype.startsWith("FP")) return 0.5;
  return 1;
}

/**
 * A predict body of one row built from the model's declared inputs: dynamic dims (-1) become 1,
 * every element a placeholder value (see `placeholder`). Throws when an input's rank is unknown.
 */
export function bodyFromSignature(inputs: readonly TensorSpec[]): string {
  const tensors: Record<string, unknown> = {};
  for (const spec of inputs) {
    if (!spec.shape) {
      throw new LoadgenError(
        `input '${spec.name}' has no declared shape, so no request can be made up for it; pass --body`,
      );
    }
    const shape = spec.shape.map((d) => (d < 0 ? 1 : d));
    const value = placeholder(spec.datatype);
    tensors[spec.name] =
      shape.length === 0 ? value : { data: new Array(elementCount(shape)).fill(value), shape };
  }
  return JSON.stringify({ inputs: tensors });
}

function firstRow(t: GoldenTensor): GoldenTensor {
  const rest = t.shape.slice(1);
  return { ...t, shape: [1, ...rest], data: t.data.slice(0, elementCount(rest)) };
}

/**
 * A predict body from a golden file's inputs: its first row when the model is batchable (every
 * input's dim 0 is the batch), else the whole example.
 */
export function bodyFromGolden(golden: GoldenFile, batchable: boolean): string {
  const tensors: Record<string, unknown> = {};
  for (const [name, t] of Object.entries(golden.inputs)) {
    const one = batchable && t.shape.length > 0 && t.shape[0]! > 1 ? firstRow(t) : t;
    tensors[name] = one.shape.length === 0 ? one.data[0] : { data: one.data, shape: one.shape };
  }
  return JSON.stringify({ inputs: tensors });
}
