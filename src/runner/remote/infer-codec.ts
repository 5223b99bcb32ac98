// The API tier's side of the Open Inference Protocol binary extension: a TensorMap becomes an
// infer request with every input as binary data (no JSON number formatting on either side), and
// a runner's binary infer response becomes a TensorMap again. The runner speaks it already
// (POST /v2/models/{m}/infer with application/octet-stream).
import { ERRORS, type ErrorCode, ModelportError } from "../../errors.js";
import { type BinaryBody, buildBinaryBody, parseHeaderLength } from "../../protocol/binary-body.js";
import { tensorDataFromBytes, tensorToBytes } from "../../protocol/tensor-bytes.js";
import { DATATYPES, type Datatype, elementCount, type TensorMap } from "../../tensor.js";

/** The request body and headers for POST /v2/models/{model}/infer. */
export function encodeInferRequest(inputs: TensorMap): BinaryBody {
  const chunks: Uint8Array[] = [];
  const list = Object.entries(inputs).map(([name, t]) => {
    const bytes = tensorToBytes(t);
    chunks.push(bytes);
    return { name, datatype: t.datatype, shape: t.shape, parameters: { binary_data_size: bytes.byteLength } };
  });
  return buildBinaryBody(
    Buffer.from(JSON.stringify({ inputs: list, parameters: { binary_data_output: true } })),
    chunks,
  );
}

function badResponse(why: string): ModelportError {
  return new ModelportError("MP_ERR_RUNNER_UNAVAILABLE", `the runner's answer could not be read: ${why}`);
}

/**
 * The outputs of a runner's binary infer response, and the version that computed them.
 * @throws ModelportError MP_ERR_RUNNER_UNAVAILABLE when the answer is not a well-formed binary response.
 */
export function decodeInferResponse(
  body: Buffer,
  headerLength: string | string[] | undefined,
): { outputs: TensorMap; version?: string } {
  let header: Record<string, unknown>;
  let rest: Uint8Array;
  try {
    const length = parseHeaderLength(headerLength, body.length);
    header = JSON.parse(body.toString("utf8", 0, length)) as Record<string, unknown>;
    rest = body.subarray(length);
  } catch (err) {
    throw badResponse((err as Error).message);
  }
  const outputs = header?.outputs;
  if (!Array.isArray(outputs)) throw badResponse("no outputs");
  const out: TensorMap = {};
  let at = 0;
  for (const o of outputs as Record<string, unknown>[]) {
    const name = o.name as string;
    const datatype = o.datatype as Datatype;
    const shape = o.shape as number[];
    const size = (o.parameters as { binary_data_size?: number } | undefined)?.binary_data_size;
    if (
      typeof name !== "string" ||
      !DATATYPES.includes(datatype) ||
      !Array.isArray(shape) ||
      size === undefined
    ) {
      throw badResponse(`output ${JSON.stringify(name)} is not binary data`);
    }
    if (at + size > rest.length) throw badResponse(`output '${name}' runs past the end of the body`);
    const bytes = rest.subarray(at, at + size);
    at += size;
    try {
      out[name] = { datatype, shape, data: tensorDataFromBytes(datatype, elementCount(shape), bytes, name) };
    } catch (err) {
      throw badResponse((err as Error).message);
    }
  }
  const version = header.model_version;
  return typeof version === "string" ? { outputs: out, version } : { outputs: out };
}

/**
 * A runner's error answer ({error: "...", code} on the OIP routes) as the same ModelportError, so
 * the client sees the runner's code and message; MP_ERR_RUNNER_UNAVAILABLE when it has no known code.
 */
export function errorFromRunner(
  status: number,
  body: Buffer,
  retryAfter?: string | string[] | undefined,
): ModelportError {
  let parsed: { error?: unknown; code?: unknown } | undefined;
  try {
    parsed = JSON.parse(body.toString("utf8")) as typeof parsed;
  } catch {
    // not JSON: a proxy's error page, a crash mid-answer
  }
  const code = parsed?.code;
  const message = typeof parsed?.error === "string" ? parsed.error : `HTTP ${status}`;
  const seconds = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
  const details = Number.isFinite(seconds) && seconds > 0 ? { retryAfterSeconds: seconds } : undefined;
  if (typeof code === "string" && code in ERRORS)
    return new ModelportError(code as ErrorCode, message, details);
  return new ModelportError(
    "MP_ERR_RUNNER_UNAVAILABLE",
    `the runner answered ${status}: ${message.slice(0, 200)}`,
  );
}
