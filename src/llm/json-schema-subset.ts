// The part of JSON Schema that a grammar can enforce token by token, as node-llama-cpp's GBNF
// JSON schemas take it: types, enum and const, string lengths and the date/time formats,
// object properties (every listed property is generated) with additionalProperties and
// property counts, arrays with items, prefixItems and lengths, anyOf/oneOf, and $ref into
// $defs (or definitions). Everything a grammar cannot promise (number ranges, patterns, other
// formats, allOf of several, not, if/then/else, uniqueItems...) is refused by name, so a client
// never gets output that ignores part of its schema; integer bounds that the grammar's own range
// already meets (zod's safe-integer bounds) are accepted. Annotations (title, description, default,
// examples, $schema, x-...) are dropped or kept as they do not constrain.

type Schema = Record<string, unknown>;

/** Why a schema cannot be enforced: the JSON path of the offending keyword and what it is. */
export class UnsupportedSchema extends Error {
  constructor(
    readonly path: string,
    readonly keyword: string,
  ) {
    super(`${path}: '${keyword}' cannot be enforced by a grammar`);
    this.name = "UnsupportedSchema";
  }
}

const ANNOTATIONS = new Set([
  "$schema",
  "$id",
  "$comment",
  "title",
  "default",
  "examples",
  "deprecated",
  "readOnly",
  "writeOnly",
  "strict",
]);
const BASIC = new Set(["string", "number", "integer", "boolean", "null"]);
const FORMATS = new Set(["date-time", "date", "time"]);
const MAX_DEPTH = 64;

/** Any JSON value, as the grammar's schemas can say it. */
const ANY: Schema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "object", additionalProperties: true },
    { type: "array" },
  ],
};

/**
 * `schema` in the subset a grammar enforces, with `#/definitions/X` refs as `#/$defs/X` and
 * every definition at the root.
 * @throws UnsupportedSchema naming the first keyword that cannot be enforced.
 */
export function grammarSchema(schema: unknown, path = "schema"): Schema {
  const root = isObject(schema) ? schema : undefined;
  const defs = {
    ...(isObject(root?.$defs) ? root.$defs : {}),
    ...(isObject(root?.definitions) ? root.definitions : {}),
  };
  const out = convert(schema, path, 0);
  const names = Object.keys(defs);
  if (names.length === 0) return out;
  const converted: Schema = {};
  for (const name of names) converted[name] = convert(defs[name], `${path}.$defs.${name}`, 1);
  // The grammar's $defs sit on object, array, oneOf and $ref schemas: wrap any other root.
  return "type" in out && BASIC.has(String(out.type))
    ? { oneOf: [out], $defs: converted }
    : { ...out, $defs: converted };
}

function convert(schema: unknown, path: string, depth: number): Schema {
  if (depth > MAX_DEPTH) throw new UnsupportedSchema(path, `nesting deeper than ${MAX_DEPTH}`);
  if (schema === true) return ANY;
  if (!isObject(schema))
    throw new UnsupportedSchema(path, typeof schema === "boolean" ? "false" : "a non-object schema");
  const s = schema as Schema;
  const keep: Schema = {};
  if (typeof s.description === "string") keep.description = s.description;
  const seen = new Set(["description", "$defs", "definitions"]);
  const take = (key: string) => {
    seen.add(key);
    return s[key];
  };
  let result: Schema;
  if (s.$ref !== undefined) {
    const ref = take("$ref");
    const m = typeof ref === "string" ? /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(ref) : null;
    if (!m) throw new UnsupportedSchema(`${path}.$ref`, `$ref ${JSON.stringify(ref)} (only #/$defs/NAME)`);
    result = { $ref: `#/$defs/${m[1]}` };
  } else if (s.const !== undefined) {
    take("type"); // the value says its type
    result = { const: primitive(take("const"), `${path}.const`) };
  } else if (s.enum !== undefined) {
    take("type");
    const values = take("enum");
    if (!Array.isArray(values) || values.length === 0)
      throw new UnsupportedSchema(`${path}.enum`, "an empty enum");
    result = { enum: values.map((v, i) => primitive(v, `${path}.enum[${i}]`)) };
  } else if (s.anyOf !== undefined || s.oneOf !== undefined) {
    const key = s.anyOf !== undefined ? "anyOf" : "oneOf";
    const list = take(key);
    if (!Array.isArray(list) || list.length === 0)
      throw new UnsupportedSchema(`${path}.${key}`, `an empty ${key}`);
    result = { oneOf: list.map((sub, i) => convert(sub, `${path}.${key}[${i}]`, depth + 1)) };
  } else if (s.allOf !== undefined) {
    const list = take("allOf");
    if (!Array.isArray(list) || list.length !== 1)
      throw new UnsupportedSchema(`${path}.allOf`, "allOf of several schemas");
    result = convert(list[0], `${path}.allOf[0]`, depth + 1);
  } else if (s.type === undefined) {
    result = ANY;
  } else {
    result = typed(s, take, path, depth);
  }
  if (s.nullable === true) {
    seen.add("nullable");
    result = { oneOf: [result, { type: "null" }] };
  } else seen.add("nullable");
  for (const key of Object.keys(s)) {
    if (seen.has(key) || ANNOTATIONS.has(key) || key.startsWith("x-")) continue;
    // A keyword of another type (minLength beside type: number) constrains nothing.
    if (IGNORED_BESIDE.has(key) && !appliesTo(key, s.type)) continue;
    throw new UnsupportedSchema(`${path}.${key}`, key);
  }
  return { ...result, ...keep };
}

/** Keywords of one type, harmless on a schema of another type. */
const IGNORED_BESIDE = new Set([
  "minLength",
  "maxLength",
  "format",
  "properties",
  "items",
  "minItems",
  "maxItems",
]);

function appliesTo(key: string, type: unknown): boolean {
  const types = Array.isArray(type) ? type : [type];
  if (key === "minLength" || key === "maxLength" || key === "format") return types.includes("string");
  if (key === "properties") return types.includes("object");
  return types.includes("array");
}

function typed(s: Schema, take: (key: string) => unknown, path: string, depth: number): Schema {
  const type = take("type");
  const types = Array.isArray(type) ? type : [type];
  for (const t of types) {
    if (typeof t !== "string" || !(BASIC.has(t) || t === "object" || t === "array"))
      throw new UnsupportedSchema(`${path}.type`, `type ${JSON.stringify(t)}`);
  }
  const parts: Schema[] = [];
  const basic = types.filter((t) => BASIC.has(t as string) && t !== "string");
  if (basic.length) parts.push({ type: basic.length === 1 ? basic[0] : basic });
  if (types.includes("integer")) integerBounds(take, path);
  if (types.includes("string")) parts.push(stringSchema(take, path));
  if (types.includes("object")) parts.push(objectSchema(take, path, depth));
  if (types.includes("array")) parts.push(arraySchema(s, take, path, depth));
  return parts.length === 1 ? parts[0]! : { oneOf: parts };
}

/** The grammar's integers stay within ±(10^15 − 1): bounds at or beyond that (zod's safe-integer bounds) hold already. */
const INTEGER_LIMIT = 10 ** 15 - 1;

function integerBounds(take: (key: string) => unknown, path: string): void {
  for (const [key, ok] of [
    ["minimum", (v: number) => v <= -INTEGER_LIMIT],
    ["exclusiveMinimum", (v: number) => v < -INTEGER_LIMIT],
    ["maximum", (v: number) => v >= INTEGER_LIMIT],
    ["exclusiveMaximum", (v: number) => v > INTEGER_LIMIT],
  ] as const) {
    const v = take(key);
    if (v !== undefined && !(typeof v === "number" && ok(v)))
      throw new UnsupportedSchema(`${path}.${key}`, `${key} ${JSON.stringify(v)}`);
  }
}

function stringSchema(take: (key: string) => unknown, path: string): Schema {
  const out: Schema = { type: "string" };
  const format = take("format");
  if (format !== undefined) {
    if (typeof format !== "string" || !FORMATS.has(format))
      throw new UnsupportedSchema(`${path}.format`, `format ${JSON.stringify(format)}`);
    return { type: "string", format };
  }
  return counts(out, ["minLength", "maxLength"], take, path);
}

function objectSchema(take: (key: string) => unknown, path: string, depth: number): Schema {
  const out: Schema = { type: "object" };
  const props = take("properties");
  if (props !== undefined) {
    if (!isObject(props))
      throw new UnsupportedSchema(`${path}.properties`, "properties that are not an object");
    const converted: Schema = {};
    for (const [k, v] of Object.entries(props))
      converted[k] = convert(v, `${path}.properties.${k}`, depth + 1);
    out.properties = converted;
  }
  // Every listed property is generated, so any `required` list is met.
  take("required");
  const extra = take("additionalProperties");
  if (extra !== undefined)
    out.additionalProperties =
      typeof extra === "boolean" ? extra : convert(extra, `${path}.additionalProperties`, depth + 1);
  else if (props === undefined) out.additionalProperties = true;
  return counts(out, ["minProperties", "maxProperties"], take, path);
}

function arraySchema(s: Schema, take: (key: string) => unknown, path: string, depth: number): Schema {
  const out: Schema = { type: "array" };
  const items = take("items");
  const prefix = take("prefixItems");
  if (Array.isArray(items))
    out.prefixItems = items.map((v, i) => convert(v, `${path}.items[${i}]`, depth + 1));
  else if (items !== undefined && items !== true) out.items = convert(items, `${path}.items`, depth + 1);
  if (prefix !== undefined) {
    if (!Array.isArray(prefix))
      throw new UnsupportedSchema(`${path}.prefixItems`, "prefixItems that are not a list");
    out.prefixItems = prefix.map((v, i) => convert(v, `${path}.prefixItems[${i}]`, depth + 1));
  }
  if (s.uniqueItems === false) take("uniqueItems");
  return counts(out, ["minItems", "maxItems"], take, path);
}

/** `out` with the count keywords `keys` (lengths, item and property counts) copied over, checked. */
function counts(out: Schema, keys: readonly string[], take: (key: string) => unknown, path: string): Schema {
  for (const key of keys) {
    const v = take(key);
    if (v === undefined) continue;
    if (!Number.isSafeInteger(v) || (v as number) < 0)
      throw new UnsupportedSchema(`${path}.${key}`, `${key} ${JSON.stringify(v)}`);
    out[key] = v;
  }
  return out;
}

function primitive(v: unknown, path: string): string | number | boolean | null {
  if (
    v === null ||
    typeof v === "string" ||
    typeof v === "boolean" ||
    (typeof v === "number" && Number.isFinite(v))
  )
    return v;
  throw new UnsupportedSchema(path, "an object or array value");
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
