// Client schemas in one dialect, JSON Schema 2020-12, which the grammar (schema-grammar.ts) and
// the validator (answer-validator.ts) both read: OpenAPI's `nullable` becomes a null branch,
// draft-07 tuples (`items: [..]`, `additionalItems`) become `prefixItems`/`items`, and `$schema`,
// `$id` and `$comment` go (a schema here stands alone). embed() then moves a schema into a larger
// one (the tool-call envelope) with every `$ref` turned into a reference to a definition at the
// new root, named under a prefix, so each function's definitions stay apart and references by
// any JSON pointer (`#`, `#/properties/a`, `#/definitions/X`) keep their meaning.
type Schema = Record<string, unknown>;

function isObject(v: unknown): v is Schema {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Keywords whose value is one schema, a list of schemas, or a map of them. */
const ONE = [
  "additionalProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
  "additionalItems",
];
const LIST = ["anyOf", "oneOf", "allOf", "prefixItems"];
const MAP = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
const DROPPED = new Set(["$schema", "$id", "$comment"]);

/** `schema` with each subschema passed through `f` (the keywords above, and `items`). */
function mapSubschemas(schema: Schema, f: (sub: unknown) => unknown): Schema {
  const out: Schema = {};
  for (const [k, v] of Object.entries(schema)) {
    if (ONE.includes(k) || (k === "items" && !Array.isArray(v))) out[k] = f(v);
    else if ((LIST.includes(k) || k === "items") && Array.isArray(v)) out[k] = v.map(f);
    else if (MAP.includes(k) && isObject(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([n, s]) => [n, f(s)]));
    else out[k] = v;
  }
  return out;
}

/** `schema` in the 2020-12 dialect (see the top comment). */
export function normalizeSchema(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  let s: Schema = {};
  for (const [k, v] of Object.entries(schema)) if (!DROPPED.has(k)) s[k] = v;
  if (Array.isArray(s.items)) {
    const { items, additionalItems, ...rest } = s;
    s = { ...rest, prefixItems: items, ...(additionalItems !== undefined ? { items: additionalItems } : {}) };
  }
  s = mapSubschemas(s, normalizeSchema);
  if ("nullable" in s) {
    const { nullable, ...rest } = s;
    return nullable === true ? { anyOf: [rest, { type: "null" }] } : rest;
  }
  return s;
}

/** A definition name safe in a JSON pointer and a grammar rule hint. */
function defName(prefix: string, pointer: string): string {
  const m = /^\/(?:\$defs|definitions)\/([^/]+)$/.exec(pointer);
  const base = m
    ? decodeURIComponent(m[1]!).replaceAll("~1", "/").replaceAll("~0", "~")
    : pointer === ""
      ? "root"
      : `at${pointer}`;
  return prefix + base.replace(/[^A-Za-z0-9._-]+/g, "_");
}

function resolve(root: unknown, pointer: string): unknown {
  let at: unknown = root;
  if (pointer === "") return at;
  for (const raw of pointer.slice(1).split("/")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    at = Array.isArray(at) ? at[Number(key)] : isObject(at) ? at[key] : undefined;
  }
  return at;
}

/**
 * `schema` (normalized) ready to sit anywhere inside another schema: its `$ref`s point at
 * `#/$defs/<prefix>…`, and `defs` holds those definitions (their own references rewritten the
 * same way). A reference that is not a pointer into the schema, or points at nothing, is kept as
 * it is (the grammar and the validator refuse it by name).
 */
export function embed(schema: unknown, prefix: string): { schema: unknown; defs: Schema } {
  const defs: Schema = {};
  const pending: [string, string][] = [];
  const rewrite = (sub: unknown): unknown => {
    if (!isObject(sub)) return sub;
    const out = mapSubschemas(sub, rewrite);
    delete out.$defs;
    delete out.definitions;
    const ref = out.$ref;
    if (typeof ref === "string" && ref.startsWith("#") && resolve(schema, ref.slice(1)) !== undefined) {
      const name = defName(prefix, ref.slice(1));
      if (!(name in defs)) {
        defs[name] = true; // claimed; filled below
        pending.push([name, ref.slice(1)]);
      }
      out.$ref = `#/$defs/${name}`;
    }
    return out;
  };
  const out = rewrite(schema);
  while (pending.length) {
    const [name, pointer] = pending.shift()!;
    defs[name] = rewrite(resolve(schema, pointer));
  }
  return { schema: out, defs };
}
