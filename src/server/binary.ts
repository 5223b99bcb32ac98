// Binary tensor bodies: the Open Inference Protocol's binary tensor data extension (as Triton
// speaks it: a JSON header of Inference-Header-Content-Length bytes, then each binary tensor's
// bytes in order) and the native route's raw single tensor (X-Tensor-Shape). Tensor bytes are
// little-endian and row-major; BOOL is one byte (0/1); FP16 is IEEE half; a BYTES element is a
// 4-byte little-endian length followed by its bytes. Validation is decode.ts's, shared with JSON.
import { fromHalfBits, toHalfBits } from "../backends/onnx/float16.js";
import { ModelportError } from "../errors.js";
import type { Datatype, ModelSignature, Tensor, TensorData, TensorMap, TensorSpec } from "../tensor.js";
import { checkInputs, type DecodeLimits, decodeTypedTensor, formatShape } from "./decode.js";
import { encodeOip } from "./encode.js";
import { jsonDepthExceeds } from "./json-body.js";

export const INFERENCE_HEADER = "inference-header-content-length";
export const SHAPE_HEADER = "x-tensor-shape";
export const DATATYPE_HEADER = "x-tensor-datatype";
export const NAME_HEADER = "x-tensor-name";
export const OCTET_STREAM = "application/octet-stream";

/** Bytes per element of every fixed-size datatype (BYTES has none). */
export const ELEMENT_BYTES: Readonly<Record<Exclude<Datatype, "BYTES">, number>> = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
};

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Reverses the bytes of each `size`-byte element in place (only on big-endian hosts). */
function swapBytes(bytes: Uint8Array, size: number): void {
  for (let i = 0; i < bytes.length; i += size) bytes.subarray(i, i + size).reverse();
}

/** A fresh typed array (own, aligned buffer) holding a copy of `bytes`. */
function copyInto<T extends Exclude<TensorData, string[]>>(
  make: (length: number) => T,
  bytes: Uint8Array,
  size: number,
): T {
  const out = make(bytes.length / size);
  const view = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  view.set(bytes);
  if (!LITTLE_ENDIAN && size > 1) swapBytes(view, size);
  return out;
}

function sizeError(what: string, message: string): ModelportError {
  return new ModelportError("MP_ERR_BINARY_DATA_SIZE", `${what}: ${message}`);
}

/** BYTES elements: each a 4-byte little-endian length, then that many bytes (read as UTF-8). */
function readBytesElements(bytes: Uint8Array, count: number, what: string): string[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const decoder = new TextDecoder();
  const out = new Array<string>(count);
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.length)
      throw sizeError(what, `${bytes.length} bytes end before element ${i} of ${count}`);
    const len = view.getUint32(at, true);
    at += 4;
    if (at + len > bytes.length)
      throw sizeError(what, `element ${i} says ${len} bytes but only ${bytes.length - at} remain`);
    out[i] = decoder.decode(bytes.subarray(at, at + len));
    at += len;
  }
  if (at !== bytes.length)
    throw sizeError(what, `${bytes.length} bytes but its ${count} BYTES elements use ${at}`);
  return out;
}

/**
 * Converts `bytes` to `count` elements of `datatype` (the representation of tensor.ts: FP16 as
 * float32, BOOL as 0/1, 64-bit integers as BigInt arrays). `what` names the bytes in errors.
 * @throws ModelportError MP_ERR_BINARY_DATA_SIZE when the byte count is not count × element size,
 *   MP_ERR_INPUT_DATATYPE when a BOOL byte is neither 0 nor 1.
 */
export function tensorDataFromBytes(
  datatype: Datatype,
  count: number,
  bytes: Uint8Array,
  what: string,
): TensorData {
  if (datatype === "BYTES") return readBytesElements(bytes, count, what);
  const size = ELEMENT_BYTES[datatype];
  if (bytes.length !== count * size) {
    throw sizeError(
      what,
      `${bytes.length} bytes, but ${count} ${datatype} elements need ${count * size} (${size} bytes each)`,
    );
  }
  switch (datatype) {
    case "BOOL": {
      const out = copyInto((n) => new Uint8Array(n), bytes, 1);
      const bad = out.findIndex((v) => v > 1);
      if (bad >= 0) {
        throw new ModelportError(
          "MP_ERR_INPUT_DATATYPE",
          `${what}: element ${bad} is the byte ${out[bad]}; expected 0 or 1 (BOOL)`,
          { index: bad, expected: "BOOL" },
        );
      }
      return out;
    }
    case "UINT8":
      return copyInto((n) => new Uint8Array(n), bytes, 1);
    case "INT8":
      return copyInto((n) => new Int8Array(n), bytes, 1);
    case "UINT16":
      return copyInto((n) => new Uint16Array(n), bytes, 2);
    case "INT16":
      return copyInto((n) => new Int16Array(n), bytes, 2);
    case "FP16":
      return fromHalfBits(copyInto((n) => new Uint16Array(n), bytes, 2));
    case "UINT32":
      return copyInto((n) => new Uint32Array(n), bytes, 4);
    case "INT32":
      return copyInto((n) => new Int32Array(n), bytes, 4);
    case "FP32":
      return copyInto((n) => new Float32Array(n), bytes, 4);
    case "UINT64":
      return copyInto((n) => new BigUint64Array(n), bytes, 8);
    case "INT64":
      return copyInto((n) => new BigInt64Array(n), bytes, 8);
    case "FP64":
      return copyInto((n) => new Float64Array(n), bytes, 8);
  }
}

/** A tensor's data as wire bytes (a view without copying where the host is little-endian). */
export function tensorToBytes(tensor: Tensor): Uint8Array {
  const data = tensor.data;
  if (Array.isArray(data)) {
    const encoder = new TextEncoder();
    const parts = data.map((s) => encoder.encode(s));
    const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
    const view = new DataView(out.buffer);
    let at = 0;
    for (const p of parts) {
      view.setUint32(at, p.length, true);
      out.set(p, at + 4);
      at += 4 + p.length;
    }
    return out;
  }
  const typed = tensor.datatype === "FP16" ? toHalfBits(data as Float32Array) : data;
  const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
  if (LITTLE_ENDIAN || typed.BYTES_PER_ELEMENT === 1) return bytes;
  const copy = bytes.slice();
  swapBytes(copy, typed.BYTES_PER_ELEMENT);
  return copy;
}

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

/**
 * The bytes after a binary request's JSON header. Inputs take their `binary_data_size` bytes in
 * order; `finish` refuses bytes nobody took.
 */
export class BinarySection {
  private offset = 0;

  /** `headerGiven` false: the body came without Inference-Header-Content-Length, so it holds no binary part. */
  constructor(
    private readonly bytes: Uint8Array,
    private readonly headerGiven = true,
  ) {}

  /**
   * Takes the next `size` bytes for input `name` and decodes them against `spec` with the JSON
   * path's checks; an unknown input (`spec` undefined) has its bytes skipped.
   */
  take(
    name: string,
    spec: TensorSpec | undefined,
    shape: unknown,
    datatype: unknown,
    size: unknown,
  ): Tensor | undefined {
    if (!this.headerGiven) {
      throw new ModelportError(
        "MP_ERR_BINARY_HEADER_LENGTH",
        `input '${name}' has parameters.binary_data_size but the request has no Inference-Header-Content-Length header: set it to the length in bytes of the JSON header that starts the body`,
        { input: name },
      );
    }
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
      throw sizeError(
        `input '${name}'`,
        `parameters.binary_data_size must be a non-negative integer, got ${JSON.stringify(size)}`,
      );
    }
    const left = this.bytes.length - this.offset;
    if (size > left) {
      throw sizeError(
        `input '${name}'`,
        `binary_data_size is ${size} but only ${left} bytes remain after the JSON header and the binary inputs before it`,
      );
    }
    const bytes = this.bytes.subarray(this.offset, this.offset + size);
    this.offset += size;
    if (!spec) return undefined;
    return decodeTypedTensor(spec, shape, datatype, (dt, count) =>
      tensorDataFromBytes(dt, count, bytes, `input '${name}' (binary_data_size ${size})`),
    );
  }

  /** @throws ModelportError MP_ERR_BINARY_TRAILING_BYTES when bytes are left over. */
  finish(): void {
    const left = this.bytes.length - this.offset;
    if (left > 0) {
      throw new ModelportError(
        "MP_ERR_BINARY_TRAILING_BYTES",
        `${left} bytes follow the last binary input: the binary part holds ${this.bytes.length} bytes but the inputs' binary_data_size values add up to ${this.offset}`,
        { extra: left },
      );
    }
  }
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

/** JSON header, then the chunks: the OIP binary layout, with its Inference-Header-Content-Length. */
export function buildBinaryBody(header: unknown, chunks: readonly Uint8Array[]): BinaryBody {
  const json = Buffer.from(JSON.stringify(header));
  return {
    body: Buffer.concat([json, ...chunks]),
    headers: { "content-type": OCTET_STREAM, [INFERENCE_HEADER]: String(json.length) },
  };
}

/**
 * An OIP infer response with the outputs in `binary` as binary data (`parameters.binary_data_size`,
 * bytes after the JSON header in output order) and the others as JSON `data`.
 */
export function encodeOipBinary(
  meta: Record<string, unknown>,
  outputs: TensorMap,
  names: readonly string[] | undefined,
  binary: ReadonlySet<string>,
): BinaryBody {
  const chunks: Uint8Array[] = [];
  const list: unknown[] = [];
  for (const [name, t] of Object.entries(outputs)) {
    if (names && !names.includes(name)) continue;
    if (!binary.has(name)) {
      list.push(encodeOip({ [name]: t })[0]);
      continue;
    }
    const bytes = tensorToBytes(t);
    chunks.push(bytes);
    list.push({
      name,
      datatype: t.datatype,
      shape: t.shape,
      parameters: { binary_data_size: bytes.byteLength },
    });
  }
  return buildBinaryBody({ ...meta, outputs: list }, chunks);
}

/** X-Tensor-Shape: comma-separated non-negative integers ("1,3,640,640"); empty for a scalar. */
export function parseShapeHeader(value: string | string[]): number[] {
  const text = (Array.isArray(value) ? value.join(",") : value).trim();
  if (text === "") return [];
  const dims = text.split(",").map((d) => (/^\s*\d+\s*$/.test(d) ? Number(d) : Number.NaN));
  if (!dims.every(Number.isSafeInteger)) {
    throw new ModelportError(
      "MP_ERR_INPUT_SHAPE",
      `X-Tensor-Shape is ${JSON.stringify(text)}; send comma-separated non-negative integers, like 1,3,640,640`,
    );
  }
  return dims;
}

/** The shape of a raw body without X-Tensor-Shape: dim 0 from the byte length, the rest fixed by the model. */
function inferShape(spec: TensorSpec, byteLength: number): number[] {
  const want = spec.shape;
  const cannot = (why: string) =>
    new ModelportError(
      "MP_ERR_INPUT_SHAPE",
      `cannot infer the shape of input '${spec.name}' (${spec.datatype} ${formatShape(want)}) from the body: ${why}; send X-Tensor-Shape`,
      { input: spec.name },
    );
  if (!want) throw cannot("the model does not declare its shape");
  if (spec.datatype === "BYTES") throw cannot("BYTES elements have no fixed size");
  if (want.slice(1).some((d) => d < 0)) throw cannot("a dim after the first is dynamic");
  if (want.length === 0 || want[0]! >= 0) return want; // fully fixed: the byte count is checked against it
  const rowBytes = want.slice(1).reduce((n, d) => n * d, ELEMENT_BYTES[spec.datatype]);
  if (rowBytes === 0) throw cannot("its rows hold no elements");
  if (byteLength % rowBytes !== 0) {
    throw sizeError(
      "the body",
      `${byteLength} bytes is not a whole number of rows of input '${spec.name}' (${rowBytes} bytes per row of ${formatShape(want.slice(1))} ${spec.datatype})`,
    );
  }
  return [byteLength / rowBytes, ...want.slice(1)];
}

/**
 * The native route's raw body: the little-endian bytes of a single-input model's only input, shaped
 * by the X-Tensor-Shape header or, without it, by the byte length and the model's fixed trailing
 * dims. An X-Tensor-Datatype header, when sent, must be the model's datatype.
 */
export function decodeRawTensor(
  body: Buffer,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  signature: ModelSignature,
  limits: DecodeLimits,
): TensorMap {
  if (signature.inputs.length !== 1) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `this model has ${signature.inputs.length} inputs (${signature.inputs.map((s) => `'${s.name}'`).join(", ")}) and a raw ${OCTET_STREAM} body carries one tensor: send JSON, or use POST /v2/models/{model}/infer with binary tensors (Inference-Header-Content-Length)`,
    );
  }
  const spec = signature.inputs[0]!;
  const shapeHeader = headers[SHAPE_HEADER];
  const shape = shapeHeader === undefined ? inferShape(spec, body.length) : parseShapeHeader(shapeHeader);
  const datatypeHeader = headers[DATATYPE_HEADER];
  const datatype = Array.isArray(datatypeHeader) ? datatypeHeader.join(",") : datatypeHeader?.trim();
  const tensor = decodeTypedTensor(spec, shape, datatype, (dt, count) =>
    tensorDataFromBytes(dt, count, body, `the body (input '${spec.name}', shape ${formatShape(shape)})`),
  );
  const tensors = { [spec.name]: tensor };
  checkInputs([spec.name], signature, tensors, limits);
  return tensors;
}

/** One output as a raw body with X-Tensor-Name, X-Tensor-Shape and X-Tensor-Datatype. */
export function encodeRawTensor(name: string, tensor: Tensor): BinaryBody {
  const bytes = tensorToBytes(tensor);
  return {
    body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    headers: {
      "content-type": OCTET_STREAM,
      [NAME_HEADER]: name,
      [SHAPE_HEADER]: tensor.shape.join(","),
      [DATATYPE_HEADER]: tensor.datatype,
    },
  };
}

/** q of each media type in an Accept header, in the order listed. */
function acceptQualities(accept: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of accept.split(",")) {
    const [type, ...params] = part.split(";");
    const q = params.map((p) => /^\s*q\s*=\s*([\d.]+)\s*$/i.exec(p)?.[1]).find((v) => v !== undefined);
    const key = type!.trim().toLowerCase();
    if (!out.has(key)) out.set(key, q === undefined ? 1 : Number(q));
  }
  return out;
}

/** True when Accept prefers application/octet-stream over JSON (a tie goes to the one listed first). */
export function wantsOctetStream(accept: string | undefined): boolean {
  if (accept === undefined || !accept.toLowerCase().includes(OCTET_STREAM)) return false;
  const q = acceptQualities(accept);
  const octet = q.get(OCTET_STREAM) ?? 0;
  if (!(octet > 0)) return false;
  const json = q.get("application/json");
  if (json === undefined || octet > json) return true;
  return octet === json && [...q.keys()].indexOf(OCTET_STREAM) < [...q.keys()].indexOf("application/json");
}

/**
 * The one output a raw response carries: the only one selected, or the model's only output.
 * @throws ModelportError MP_ERR_RESPONSE_NOT_ACCEPTABLE when there would be several.
 */
export function rawOutputName(names: readonly string[] | undefined, signature: ModelSignature): string {
  const list = names ?? signature.outputs.map((o) => o.name);
  if (list.length !== 1) {
    throw new ModelportError(
      "MP_ERR_RESPONSE_NOT_ACCEPTABLE",
      `Accept: ${OCTET_STREAM} returns one raw tensor but this response would hold ${list.length} outputs (${list.map((n) => `'${n}'`).join(", ")}): select one with ?outputs=NAME (or "outputs" in a JSON body), or accept application/json`,
    );
  }
  return list[0]!;
}
