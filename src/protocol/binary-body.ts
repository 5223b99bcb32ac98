// The Open Inference Protocol's binary tensor data extension, as Triton speaks it: a JSON header
// of Inference-Header-Content-Length bytes, then each binary tensor's bytes in order. Splitting
// a request body, choosing binary outputs, and building a binary response.
import { ModelportError } from "../errors.js";
import type { ModelSignature } from "../tensor.js";
import { BinarySection } from "./binary-section.js";
import { INFERENCE_HEADER, OCTET_STREAM } from "./headers.js";
import { jsonDepthExceeds } from "./json-depth.js";
import { type OipAnswerOutput, oipAnswer } from "./oip-body.js";
import { tensorToBytes } from "./tensor-bytes.js";

// Fastify's JSON parser refuses __proto__ keys; the JSON header of a binary body gets the same rule.
const PROTO_KEY =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"/;

function parseJsonHeader(text: string): unknown {
  if (!PROTO_KEY.test(text)) return JSON.parse(text);
  return JSON.parse(text, (key, value) => {
    if (key === "__proto__") throw new SyntaxError("Object contains forbidden prototype property");
    return value;
  });
}

/** Inference-Header-Content-Length as a number: a whole number from 1 to the body's length. */
export function parseHeaderLength(value: string | string[] | undefined, bodyLength: number): number {
  const text = Array.isArray(value) ? value.join(",") : (value ?? "");
  const n = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 1 || n > bodyLength) {
    const why =
      n === 0
        ? "0 (a raw tensor body without a JSON header) is not supported on this route"
        : n > bodyLength
          ? `it is beyond the ${bodyLength}-byte body`
          : "it must be a whole number of bytes";
    throw new ModelportError(
      "MP_ERR_BINARY_HEADER_LENGTH",
      `Inference-Header-Content-Length is ${JSON.stringify(text)}: ${why}. It gives the length of the JSON header at the start of the body`,
    );
  }
  return n;
}

/**
 * An OIP infer body as the route received it: a parsed JSON object passes through; a Buffer (a
 * binary request) is split at Inference-Header-Content-Length into its JSON header and binary
 * part. Without the header the whole body must be the JSON header (Triton does the same).
 */
export function splitOipBody(
  raw: unknown,
  headerLength: string | string[] | undefined,
  maxJsonDepth: number,
): { body: Record<string, unknown> | undefined; binary?: BinarySection } {
  if (!Buffer.isBuffer(raw)) return { body: raw as Record<string, unknown> | undefined };
  const given = headerLength !== undefined;
  const length = given ? parseHeaderLength(headerLength, raw.length) : raw.length;
  const text = raw.toString("utf8", 0, length);
  // The same depth limit as a JSON body: the header's values reach the same recursive code.
  if (jsonDepthExceeds(text, maxJsonDepth)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `the JSON header nests arrays and objects deeper than ${maxJsonDepth} levels (limits.maxJsonDepth)`,
    );
  }
  let header: unknown;
  try {
    header = parseJsonHeader(text);
  } catch (err) {
    if (!given) {
      throw new ModelportError(
        "MP_ERR_BINARY_HEADER_LENGTH",
        "Inference-Header-Content-Length is missing: a binary infer body starts with a JSON header and the header gives its length in bytes",
      );
    }
    throw new ModelportError(
      "MP_ERR_REQUEST_MALFORMED_JSON",
      `the JSON header (the first ${length} bytes, per Inference-Header-Content-Length) is not valid JSON: ${(err as Error).message}`,
    );
  }
  return {
    body: header as Record<string, unknown>,
    binary: new BinarySection(raw.subarray(length), given),
  };
}

function boolParameter(params: unknown, key: string, where: string): boolean | undefined {
  if (params === undefined) return undefined;
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `${where}: "parameters" must be an object`);
  }
  const v = (params as Record<string, unknown>)[key];
  if (v !== undefined && typeof v !== "boolean") {
    throw new ModelportError("MP_ERR_REQUEST_INVALID", `${where}: parameters.${key} must be true or false`);
  }
  return v;
}

/**
 * The outputs an OIP request wants back as binary: `parameters.binary_data` on a requested output,
 * else the request's `parameters.binary_data_output`. Undefined when none (a plain JSON response).
 * `body.outputs` must already have passed requestedOutputs.
 */
export function binaryOutputs(
  body: Record<string, unknown> | undefined,
  signature: ModelSignature,
): Set<string> | undefined {
  if (!body) return undefined;
  const all = boolParameter(body.parameters, "binary_data_output", "the request") ?? false;
  const set = new Set<string>();
  if (Array.isArray(body.outputs)) {
    body.outputs.forEach((o, i) => {
      if (typeof o === "string") {
        if (all) set.add(o);
        return;
      }
      const out = o as { name: string; parameters?: unknown };
      if (boolParameter(out.parameters, "binary_data", `outputs[${i}]`) ?? all) set.add(out.name);
    });
  } else if (all) {
    for (const o of signature.outputs) set.add(o.name);
  }
  return set.size > 0 ? set : undefined;
}

/** A binary response: the body and the headers that go with it. */
export interface BinaryBody {
  body: Buffer;
  headers: Record<string, string>;
}

/** The JSON header, then the chunks: the OIP binary layout, with its Inference-Header-Content-Length. */
export function buildBinaryBody(header: Buffer, chunks: readonly Uint8Array[]): BinaryBody {
  return {
    body: Buffer.concat([header, ...chunks]),
    headers: { "content-type": OCTET_STREAM, [INFERENCE_HEADER]: String(header.length) },
  };
}

/**
 * An OIP infer response with the outputs in `binary` as binary data (`parameters.binary_data_size`,
 * bytes after the JSON header in output order) and the others as they are: JSON `data`, or their
 * parameters alone (an output written to shared memory).
 */
export function encodeOipBinary(
  meta: Record<string, unknown>,
  outputs: readonly OipAnswerOutput[],
  binary: ReadonlySet<string>,
): BinaryBody {
  const chunks: Uint8Array[] = [];
  const list = outputs.map((o) => {
    if (o.parameters || !binary.has(o.name)) return o;
    const bytes = tensorToBytes(o.tensor);
    chunks.push(bytes);
    return { ...o, parameters: { binary_data_size: bytes.byteLength } };
  });
  return buildBinaryBody(oipAnswer(meta, list).finish(), chunks);
}
