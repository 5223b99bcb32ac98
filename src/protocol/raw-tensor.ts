// The native route's raw single tensor: an application/octet-stream body shaped by X-Tensor-Shape
// (or by its length and the model's fixed trailing dims), and one output answered the same way
// when Accept prefers it.
import { ModelportError } from "../errors.js";
import type { ModelSignature, Tensor, TensorMap, TensorSpec } from "../tensor.js";
import type { BinaryBody } from "./binary-body.js";
import { checkInputs, type DecodeLimits, decodeTypedTensor, formatShape } from "./decode-tensor.js";
import { DATATYPE_HEADER, NAME_HEADER, OCTET_STREAM, SHAPE_HEADER } from "./headers.js";
import { ELEMENT_BYTES, sizeError, tensorDataFromBytes, tensorToBytes } from "./tensor-bytes.js";

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
