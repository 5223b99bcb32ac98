// One captured request/response pair: what the route hook hands over (references to the bodies
// as the request had them, nothing serialized yet), and how it becomes one JSON line in the
// background: binary tensor bodies described instead of copied, redaction applied, and the line
// held within the model's capture.maxBytes by cutting the bodies (marked `truncated`).
// The record format is documented in docs/Capture.md; keep the two together.
import type { CaptureConfig } from "../config/schema.js";
import { INFERENCE_HEADER } from "../protocol/headers.js";
import { parseRedactPath, type RedactPath, redact } from "./redact.js";

/** The surfaces whose pairs are captured (the record's `protocol`). */
export type CaptureProtocol = "native" | "oip" | "openai";

/** A model's capture settings, ready to use: redaction paths parsed once. */
export interface CapturePolicy {
  readonly sampleRate: number;
  readonly paths: readonly RedactPath[];
  readonly maxBytes: number;
}

const policies = new WeakMap<object, CapturePolicy>();

/** The policy of a model's capture config, parsed once per config object. */
export function capturePolicy(config: Readonly<CaptureConfig>): CapturePolicy {
  let p = policies.get(config);
  if (!p) {
    p = Object.freeze({
      sampleRate: config.sampleRate,
      paths: Object.freeze(config.redact.map(parseRedactPath)),
      maxBytes: config.maxBytes,
    });
    policies.set(config, p);
  }
  return p;
}

/** Headers that describe a binary body (its bytes are never captured). */
export interface BinaryHeaders {
  /** Inference-Header-Content-Length: the JSON header's length in an OIP binary body. */
  readonly [INFERENCE_HEADER]?: string;
  readonly "content-type"?: string;
  readonly "x-tensor-name"?: string;
  readonly "x-tensor-shape"?: string;
  readonly "x-tensor-datatype"?: string;
}

/** A body as the request or response had it: a parsed value, serialized text, or binary bytes. */
export type BodyRef =
  /** A parsed value; `bytes`: its size as received (Content-Length), for the queue's byte bound. */
  | { readonly kind: "value"; readonly value: unknown; readonly bytes?: number }
  /** A serialized payload (a Buffer when it went out as bytes, plugins' asciiBody), JSON or plain text. */
  | { readonly kind: "text"; readonly text: string | Buffer; readonly json: boolean }
  | { readonly kind: "binary"; readonly data: Buffer; readonly headers: BinaryHeaders };

export interface PendingRecord {
  /** Unix ms when the request arrived. */
  readonly time: number;
  readonly model: string;
  readonly version: string | null;
  readonly key: string | null;
  readonly requestId: string;
  readonly route: string;
  readonly protocol: CaptureProtocol;
  readonly status: number;
  readonly latencyMs: number;
  readonly request: BodyRef | undefined;
  readonly response: BodyRef | undefined;
  /** A failure after the status was sent (a stream cut by an error). */
  readonly error?: { readonly code: string; readonly message: string };
  readonly policy: CapturePolicy;
}

/** Longest error message kept in a record. */
const MAX_ERROR_CHARS = 512;
/**
 * The error message of a record whose request had fields redacted: a message can quote the
 * values sent ("element 3 is the string ..."), the redacted ones included.
 */
export const MESSAGE_WITHHELD = "[redacted: the message may quote the fields redacted]";
const BINARY_NOTE = "binary tensor data is not captured";

/** Roughly how many bytes the record holds on to while it waits (for the queue's byte bound). */
export function heldBytes(r: Pick<PendingRecord, "request" | "response">): number {
  return bodyBytes(r.request) + bodyBytes(r.response) + 256;
}

function bodyBytes(b: BodyRef | undefined): number {
  if (!b) return 0;
  if (b.kind === "text") return b.text.length;
  if (b.kind === "binary") return b.data.length;
  return b.bytes ?? 0;
}

/** The JSON header at the start of an OIP binary body, parsed (undefined when unreadable). */
function jsonHeader(
  data: Buffer,
  length: string | undefined,
): { header: unknown; length: number } | undefined {
  const n = Number(length);
  if (!Number.isSafeInteger(n) || n < 1 || n > data.length) return undefined;
  try {
    return { header: JSON.parse(data.subarray(0, n).toString("utf8")) as unknown, length: n };
  } catch {
    return undefined;
  }
}

/** A binary body as captured: its JSON header (OIP) or tensor headers (raw), its size and a note. */
export function describeBinary(data: Buffer, headers: BinaryHeaders): Record<string, unknown> {
  const parsed = jsonHeader(data, headers[INFERENCE_HEADER]);
  if (parsed)
    return { ...asObject(parsed.header), binary_data_bytes: data.length - parsed.length, note: BINARY_NOTE };
  const tensor: Record<string, string> = {};
  if (headers["x-tensor-name"]) tensor.name = headers["x-tensor-name"];
  if (headers["x-tensor-shape"]) tensor.shape = headers["x-tensor-shape"];
  if (headers["x-tensor-datatype"]) tensor.datatype = headers["x-tensor-datatype"];
  return {
    ...(Object.keys(tensor).length ? { tensor } : {}),
    content_type: headers["content-type"] ?? null,
    binary_data_bytes: data.length,
    note: BINARY_NOTE,
  };
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : { header: v };
}

/** A body as a JSON value, parsing text only when asked (redaction, errors) or when needed. */
function bodyValue(b: BodyRef | undefined): unknown {
  if (!b) return null;
  if (b.kind === "value") return b.value ?? null;
  if (b.kind === "binary") return describeBinary(b.data, b.headers);
  const text = textOf(b.text);
  if (!b.json) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

const textOf = (t: string | Buffer) => (typeof t === "string" ? t : t.toString("utf8"));

/**
 * A body as JSON text, and whether redaction replaced any of it: serialized JSON payloads are used
 * as they are unless they must be changed.
 */
function jsonOf(b: BodyRef | undefined, paths: readonly RedactPath[]): { text: string; redacted: boolean } {
  if (b?.kind === "text" && b.json && paths.length === 0) {
    const text = textOf(b.text);
    if (text !== "" && !text.includes("\n")) return { text, redacted: false };
  }
  const v = bodyValue(b);
  // redact() returns the value itself when no path matched anything.
  const out = paths.length ? redact(v, paths) : v;
  return { text: JSON.stringify(out) ?? "null", redacted: out !== v };
}

/** The error of a failed response in any of the three wire shapes (plugins/errors.ts). */
function errorOf(body: unknown): { code: string; message: string } {
  const b = body as { error?: unknown; code?: unknown } | null;
  const e = b?.error;
  if (e && typeof e === "object") {
    const o = e as { code?: unknown; message?: unknown };
    return { code: String(o.code ?? ""), message: String(o.message ?? "") };
  }
  if (typeof e === "string") return { code: typeof b?.code === "string" ? b.code : "", message: e };
  return { code: "", message: typeof body === "string" ? body : "" };
}

const byteLength = (s: string) => Buffer.byteLength(s, "utf8");

/** `{...head, request, response}` as one line, the bodies spliced in as JSON text. */
function assemble(head: Record<string, unknown>, request: string, response: string): string {
  return `${JSON.stringify(head).slice(0, -1)},"request":${request},"response":${response}}`;
}

/** A body cut to at most `budget` bytes of JSON: its size and the start of its JSON text. */
function cut(json: string, budget: number): string {
  const total = byteLength(json);
  const shell = (prefix: string) => `{"truncated":true,"bytes":${total},"prefix":${prefix}}`;
  const room = budget - byteLength(shell('""'));
  if (room <= 0) return shell('""');
  let chars = Math.min(json.length, room);
  for (;;) {
    const prefix = JSON.stringify(json.slice(0, chars));
    const over = byteLength(prefix) - 2 - room;
    if (over <= 0 || chars === 0) return shell(prefix);
    chars = Math.max(0, chars - Math.max(1, Math.ceil(over / 2)));
  }
}

/**
 * The record as one JSON line (no trailing newline), at most policy.maxBytes bytes: bodies that
 * would not fit are replaced by {truncated, bytes, prefix}, and the record gets truncated: true.
 * Redaction happens before any cutting, so a prefix never shows a redacted field.
 */
export function serializeRecord(r: PendingRecord): string {
  const { paths, maxBytes } = r.policy;
  const failed = r.error !== undefined || r.status >= 400;
  let error = r.error;
  if (!error && failed) error = errorOf(bodyValue(r.response));
  const request = jsonOf(r.request, paths);
  const message = request.redacted ? MESSAGE_WITHHELD : error?.message.slice(0, MAX_ERROR_CHARS);
  const head: Record<string, unknown> = {
    time: new Date(r.time).toISOString(),
    model: r.model,
    version: r.version,
    key: r.key,
    requestId: r.requestId,
    route: r.route,
    protocol: r.protocol,
    status: r.status,
    latencyMs: Math.round(r.latencyMs * 1000) / 1000,
    ...(error ? { error: { code: error.code, message } } : {}),
  };
  // A failure's answer is its error (above); the body would only repeat it.
  const response = failed ? "null" : jsonOf(r.response, paths).text;
  return fit(head, request.text, response, maxBytes);
}

/** The record's line within maxBytes: bodies that do not fit are cut, or dropped. */
function fit(head: Record<string, unknown>, request: string, response: string, maxBytes: number): string {
  const whole = assemble(head, request, response);
  if (byteLength(whole) <= maxBytes) return whole;

  head.truncated = true;
  const reqBytes = byteLength(request);
  const resBytes = byteLength(response);
  const avail = maxBytes - byteLength(assemble(head, "", ""));
  // A body that fits in half the room stays whole; the other gets the rest.
  let reqBudget = Math.floor(avail / 2);
  let resBudget = avail - reqBudget;
  if (reqBytes <= reqBudget) resBudget = avail - reqBytes;
  else if (resBytes <= resBudget) reqBudget = avail - resBytes;
  const line = assemble(
    head,
    reqBytes <= reqBudget ? request : cut(request, reqBudget),
    resBytes <= resBudget ? response : cut(response, resBudget),
  );
  if (byteLength(line) <= maxBytes) return line;
  // The head alone leaves no room (a very long route or error): the bodies go entirely.
  return assemble(head, "null", "null");
}
