// What POST /v1/batches checks before a batch runs: every line's url is the batch's endpoint and
// its body names a model the key may use and that serves it (OpenAI's errors.data, with lines),
// and the batch's metadata is OpenAI's shape.
import type { Catalogue } from "../catalogue/catalogue.js";
import type { Capability } from "../catalogue/served-model.js";
import { isModelportError, ModelportError } from "../errors.js";
import { endpointCapability, type LanguageEndpoint } from "../jobs/language-work.js";
import type { BatchLine } from "./batch-input.js";
import type { BatchError } from "./batch-store.js";

/** errors.data entries kept for a batch that fails validation. */
const MAX_ERRORS = 100;
const METADATA_PAIRS = 16;
const METADATA_KEY_CHARS = 64;
const METADATA_VALUE_CHARS = 512;

export const invalid = (param: string, message: string) =>
  new ModelportError("MP_ERR_REQUEST_INVALID", message, { param });

/**
 * What is wrong with each line (at most 100): a url other than the endpoint, no model, a model the
 * key may not use or that does not serve the endpoint. Empty when the batch may run.
 */
export function validateLines(
  lines: readonly BatchLine[],
  endpoint: LanguageEndpoint,
  mayUse: (name: string) => boolean,
  catalogue: Catalogue,
): BatchError[] {
  const errors: BatchError[] = [];
  const byModel = new Map<string, ModelportError | undefined>();
  const capability = endpointCapability(endpoint);
  for (const l of lines) {
    if (errors.length === MAX_ERRORS) break;
    if (l.url !== endpoint) {
      errors.push({
        code: "MP_ERR_REQUEST_INVALID",
        message: `"url" is ${l.url}; every line of this batch must use its endpoint, ${endpoint}`,
        line: l.line,
        param: "url",
      });
      continue;
    }
    const model = l.body.model;
    if (typeof model !== "string" || model === "") {
      errors.push({
        code: "MP_ERR_REQUEST_INVALID",
        message: '"body.model" must name a served model',
        line: l.line,
        param: "body.model",
      });
      continue;
    }
    if (!byModel.has(model)) byModel.set(model, modelProblem(model, capability, mayUse, catalogue));
    const problem = byModel.get(model);
    if (problem)
      errors.push({ code: problem.code, message: problem.message, line: l.line, param: "body.model" });
  }
  return errors;
}

/** Why `model` cannot serve the batch's endpoint for this caller, or undefined. */
function modelProblem(
  model: string,
  capability: Capability,
  mayUse: (name: string) => boolean,
  catalogue: Catalogue,
): ModelportError | undefined {
  // A model the key may not use is the same "not found" as one that does not exist.
  if (!mayUse(model))
    return new ModelportError("MP_ERR_MODEL_NOT_FOUND", `model '${model}' is not served here`);
  try {
    const served = catalogue.find(model, capability);
    // A model still loading may not know all it can do yet: its jobs say so if it cannot.
    if (served.ready && !served.capabilities[capability]) {
      return new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${model}' does not serve this batch's endpoint (${capability})`,
      );
    }
    return undefined;
  } catch (err) {
    return isModelportError(err) ? err : new ModelportError("MP_ERR_SERVER_INTERNAL", String(err));
  }
}

/**
 * OpenAI's metadata: at most 16 string pairs, keys up to 64 and values up to 512 characters.
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming `metadata`
 */
export function checkMetadata(metadata: unknown): Record<string, string> | undefined {
  if (metadata === undefined || metadata === null) return undefined;
  if (typeof metadata !== "object" || Array.isArray(metadata))
    throw invalid("metadata", '"metadata" must be an object of string values');
  const entries = Object.entries(metadata as Record<string, unknown>);
  if (entries.length > METADATA_PAIRS)
    throw invalid("metadata", `"metadata" holds at most ${METADATA_PAIRS} pairs`);
  for (const [k, v] of entries) {
    if (k.length > METADATA_KEY_CHARS || typeof v !== "string" || v.length > METADATA_VALUE_CHARS) {
      throw invalid(
        "metadata",
        `"metadata" keys are at most ${METADATA_KEY_CHARS} characters and values strings of at most ${METADATA_VALUE_CHARS}`,
      );
    }
  }
  return metadata as Record<string, string>;
}
