// Checks a structured answer against the whole schema the client sent, with Ajv (JSON Schema
// 2020-12, the dialect schema-normalize.ts writes) and ajv-formats. The grammar holds most of a
// schema while the answer is generated; this is what holds all of it: an answer leaves only
// once it parses and validates here. "time" accepts a time without an offset, as zod and
// pydantic write it (ajv-formats' own "time" wants one); formats Ajv does not know are
// annotations and pass. Compiled validators are kept, a bounded number.
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsPlugin from "ajv-formats";

type AddFormats = (ajv: Ajv2020) => Ajv2020;
const addFormats = ((addFormatsPlugin as unknown as { default?: AddFormats }).default ??
  addFormatsPlugin) as unknown as AddFormats;

const MAX_VALIDATORS = 64;

const ajv = new Ajv2020({ strict: false, allErrors: false, logger: false, validateFormats: true });
addFormats(ajv);
ajv.addFormat("time", /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?(z|[+-]([01]\d|2[0-3]):?[0-5]\d)?$/i);

const cache = new Map<string, ValidateFunction>();

/**
 * The validator of `schema`.
 * @throws Error with Ajv's message when the schema itself is not valid JSON Schema.
 */
export function validatorFor(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = cache.get(key);
  if (!validate) {
    validate = ajv.compile(schema as object);
    cache.set(key, validate);
    if (cache.size > MAX_VALIDATORS) cache.delete(cache.keys().next().value!);
  }
  return validate;
}

/** Why `value` does not satisfy `schema` (Ajv's words), or undefined when it does. */
export function schemaProblem(schema: unknown, value: unknown): string | undefined {
  const validate = validatorFor(schema);
  if (validate(value)) return undefined;
  return ajv.errorsText(validate.errors, { dataVar: "answer" });
}
