// A JSON Schema as a GBNF grammar (llama.cpp's notation) for the JSON values that satisfy it,
// written here rather than by node-llama-cpp so that what real schemas say holds while a value
// is generated: integer and number ranges digit by digit (integer-ranges.ts), string patterns
// (regex-grammar.ts), formats (date, time, date-time, duration, uuid, email, hostname, ipv4,
// ipv6, uri), lengths and item counts, nullable types, anyOf/oneOf, enum/const of any value,
// $ref anywhere in the schema (recursion included), optional properties, and whitespace bounded
// (at most one space or newline where JSON allows whitespace: a model that favours whitespace
// cannot spend its tokens on it).
//
// What a grammar cannot say (uniqueItems, multipleOf, not, if/then/else, exclusive bounds on
// decimals, a pattern beside a format…) is left to validation: the grammar then writes a
// superset of the valid values and `exact` is false, so the caller validates each answer
// against the whole schema (answer-validator.ts) before it leaves. A schema no finite value
// satisfies, a pattern feature no grammar holds, or a reference outside the document is refused
// by name (UnsupportedSchema).

import { literal, Needs, repetition } from "./gbnf.js";
import { grammarProblem } from "./grammar-problem.js";
import { decimalRange, INTEGER_LIMIT, integerRange } from "./integer-ranges.js";
import { patternGrammar, UnsupportedPattern } from "./regex-grammar.js";

type Schema = Record<string, unknown>;

/** Why a schema cannot be served: the JSON path of the offending keyword and what it is. */
export class UnsupportedSchema extends Error {
  constructor(
    readonly path: string,
    readonly keyword: string,
  ) {
    super(`${path}: ${keyword}`);
    this.name = "UnsupportedSchema";
  }
}

export interface SchemaGrammar {
  /** GBNF with its root rule named `root`. */
  gbnf: string;
  /** Every keyword is held by the grammar: an answer it writes always validates. */
  exact: boolean;
  /** The characters the grammar may need a token for (checked against a model's vocabulary). */
  needs: Needs;
}

/** Counts (lengths, items, properties) beyond this are checked by validation, not expanded into rules. */
const MAX_COUNT = 1000;
const MAX_DEPTH = 64;

/** Keywords that say nothing about which values are valid. */
const ANNOTATIONS = new Set([
  "$schema",
  "$id",
  "$comment",
  "$defs",
  "definitions",
  "title",
  "description",
  "default",
  "examples",
  "example",
  "deprecated",
  "readOnly",
  "writeOnly",
  "strict",
  "discriminator",
  "contentMediaType",
  "contentEncoding",
  "xml",
  "externalDocs",
]);

/** Keywords the grammar holds, by the type they constrain. */
const HELD: Record<string, ReadonlySet<string>> = {
  any: new Set(["type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable"]),
  string: new Set(["minLength", "maxLength", "pattern", "format"]),
  integer: new Set(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
  number: new Set(["minimum", "maximum"]),
  array: new Set(["items", "prefixItems", "minItems", "maxItems", "additionalItems"]),
  object: new Set(["properties", "required", "additionalProperties"]),
};

/** Format grammars: JSON strings (quotes included) that every common validator accepts. */
const FORMATS: Record<string, string> = {
  // Days 01–28 are valid in every month.
  date: '"\\"" date "\\""',
  time: '"\\"" time "\\""',
  "date-time": '"\\"" date "T" time ( "." [0-9]{3} )? "Z" "\\""',
  duration: '"\\"" "P" ( [1-9] [0-9]{0,3} "D" | "T" [1-9] [0-9]{0,4} "S" ) "\\""',
  uuid: '"\\"" hex{8} "-" hex{4} "-" [1-8] hex{3} "-" [89ab] hex{3} "-" hex{12} "\\""',
  email: '"\\"" [a-zA-Z0-9_+-]{1,32} "@" host "\\""',
  hostname: '"\\"" host "\\""',
  ipv4: '"\\"" octet "." octet "." octet "." octet "\\""',
  ipv6: '"\\"" hex{1,4} ( ":" hex{1,4} ){7} "\\""',
  uri: '"\\"" "https://" host ( "/" [a-zA-Z0-9._~-]{1,20} ){0,4} "\\""',
};
FORMATS.url = FORMATS.uri!;
FORMATS["uri-reference"] = FORMATS.uri!;
FORMATS["iso-date-time"] = FORMATS["date-time"]!;
FORMATS["iso-time"] = FORMATS.time!;

/** Rules the format grammars use. */
const FORMAT_RULES: Record<string, string> = {
  date: '[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] )',
  time: '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9]',
  hex: "[0-9a-f]",
  host: '[a-z0-9]{1,20} ( "." [a-z0-9]{1,20} ){0,2} "." [a-z]{2,6}',
  octet: `( ${integerRange(0, 255)} )`,
};

/** The rules every grammar may use. */
const BASE_RULES: Record<string, string> = {
  ws: "[ \\n]?",
  char: '[^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]',
  string: '"\\"" char* "\\""',
  integer: `"-"? ( "0" | [1-9] [0-9]{0,14} )`,
  number: `"-"? ( "0" | [1-9] [0-9]{0,14} ) ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?`,
  boolean: '"true" | "false"',
  null: '"null"',
  value: "object | array | string | number | boolean | null",
  object: '"{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? ws "}"',
  array: '"[" ws ( value ( "," ws value )* )? ws "]"',
};

function isObject(v: unknown): v is Schema {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The value at JSON pointer `pointer` (after '#') in `root`. */
export function resolvePointer(root: unknown, pointer: string): unknown {
  if (pointer === "") return root;
  let at: unknown = root;
  for (const raw of pointer.slice(1).split("/")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (Array.isArray(at)) at = at[Number(key)];
    else if (isObject(at)) at = at[key];
    else return undefined;
  }
  return at;
}

class Builder {
  readonly rules = new Map<string, string>();
  readonly needs = new Needs();
  exact = true;
  private readonly refs = new Map<string, string>();
  private serial = 0;

  constructor(private readonly root: unknown) {
    this.needs.text('{}[],:"-.0123456789truefalsn');
  }

  /** A new rule named after `hint` holding `body`; the name. */
  private add(hint: string, body: string): string {
    const base =
      hint
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, "-")
        .replace(/^-|-$/g, "")
        .slice(0, 32) || "r";
    const name = `${base}-${++this.serial}`;
    this.rules.set(name, body);
    return name;
  }

  /** A rule every grammar shares (ws, string, number…), added once with what it uses. */
  base(name: string): string {
    if (this.rules.has(name)) return name;
    const body = BASE_RULES[name] ?? FORMAT_RULES[name]!;
    this.rules.set(name, body);
    for (const used of body.match(/\b[a-z]+\b/g) ?? [])
      if ((BASE_RULES[used] || FORMAT_RULES[used]) && used !== name) this.base(used);
    return name;
  }

  loose(): void {
    this.exact = false;
  }

  /** The GBNF expression for values of `schema`. */
  gen(schema: unknown, path: string, depth: number): string {
    if (depth > MAX_DEPTH) throw new UnsupportedSchema(path, `nesting deeper than ${MAX_DEPTH}`);
    if (schema === true || (isObject(schema) && Object.keys(schema).every((k) => ANNOTATIONS.has(k))))
      return this.base("value");
    if (schema === false) throw new UnsupportedSchema(path, "the schema false (no value satisfies it)");
    if (!isObject(schema)) throw new UnsupportedSchema(path, "a schema that is not an object or a boolean");
    const s = schema;
    if (s.$ref !== undefined) return this.ref(s, path, depth);
    if (s.allOf !== undefined) return this.gen(this.merged(s, path), path, depth + 1);
    if (s.const !== undefined) {
      this.checkOthers(s, ["const"]);
      return this.constant(s.const);
    }
    if (s.enum !== undefined) {
      if (!Array.isArray(s.enum) || s.enum.length === 0)
        throw new UnsupportedSchema(`${path}.enum`, "an empty enum (no value satisfies it)");
      this.checkOthers(s, ["enum"]);
      return `( ${s.enum.map((v) => this.constant(v)).join(" | ")} )`;
    }
    const union = s.anyOf ?? s.oneOf;
    if (union !== undefined) {
      const key = s.anyOf !== undefined ? "anyOf" : "oneOf";
      if (!Array.isArray(union) || union.length === 0)
        throw new UnsupportedSchema(`${path}.${key}`, `an empty ${key}`);
      if (s.anyOf !== undefined && s.oneOf !== undefined) this.loose();
      if (key === "oneOf" && union.length > 1) this.loose();
      const { anyOf: _a, oneOf: _o, ...rest } = s;
      const siblings = Object.keys(rest).filter((k) => !ANNOTATIONS.has(k));
      const alts = union.map((branch, i) => {
        const b = siblings.length && isObject(branch) ? { ...rest, ...branch } : branch;
        return this.gen(b, `${path}.${key}[${i}]`, depth + 1);
      });
      return `( ${alts.join(" | ")} )`;
    }
    const types = this.types(s, path);
    if (types.length === 0) return this.base("value");
    const alts = types.map((t) => this.typed(t, s, path, depth));
    return alts.length === 1 ? alts[0]! : `( ${alts.join(" | ")} )`;
  }

  /** Keywords beside const/enum that could narrow further are left to validation. */
  private checkOthers(s: Schema, held: string[]): void {
    for (const k of Object.keys(s))
      if (!held.includes(k) && !ANNOTATIONS.has(k) && k !== "type") {
        this.loose();
        return;
      }
  }

  private ref(s: Schema, path: string, depth: number): string {
    const ref = s.$ref;
    if (typeof ref !== "string" || !ref.startsWith("#"))
      throw new UnsupportedSchema(
        `${path}.$ref`,
        `the reference ${JSON.stringify(ref)} (only references within the schema, #/…)`,
      );
    if (Object.keys(s).some((k) => k !== "$ref" && !ANNOTATIONS.has(k))) this.loose();
    const known = this.refs.get(ref);
    if (known) return known;
    const target = resolvePointer(this.root, ref.slice(1));
    if (target === undefined)
      throw new UnsupportedSchema(`${path}.$ref`, `the reference ${ref}, which points at nothing`);
    const name = this.add(`ref-${ref.split("/").pop()}`, "");
    this.refs.set(ref, name);
    this.rules.set(name, this.gen(target, ref, depth + 1));
    return name;
  }

  /** allOf as one schema: objects' properties and required lists joined; other keywords of later parts win. */
  private merged(s: Schema, path: string): Schema {
    const parts = s.allOf;
    if (!Array.isArray(parts) || parts.length === 0)
      throw new UnsupportedSchema(`${path}.allOf`, "an empty allOf");
    const { allOf: _, ...rest } = s;
    let out: Schema = { ...rest };
    if (parts.length > 1 || Object.keys(rest).some((k) => !ANNOTATIONS.has(k))) this.loose();
    for (const [i, raw] of parts.entries()) {
      let part = raw;
      if (isObject(part) && typeof part.$ref === "string")
        part = resolvePointer(this.root, part.$ref.slice(1));
      if (part === true) continue;
      if (!isObject(part))
        throw new UnsupportedSchema(`${path}.allOf[${i}]`, "a part that is not a schema object");
      const props = {
        ...(isObject(out.properties) ? out.properties : {}),
        ...(isObject(part.properties) ? part.properties : {}),
      };
      const required = [
        ...new Set([
          ...(Array.isArray(out.required) ? out.required : []),
          ...(Array.isArray(part.required) ? part.required : []),
        ]),
      ];
      out = { ...out, ...part };
      if (Object.keys(props).length) out.properties = props;
      if (required.length) out.required = required;
    }
    return out;
  }

  private types(s: Schema, path: string): string[] {
    const t = s.type;
    if (t === undefined) {
      // No type: the keywords say which.
      const has = (keys: string[]) => keys.some((k) => k in s);
      const inferred: string[] = [];
      if (has(["properties", "additionalProperties", "required", "minProperties", "maxProperties"]))
        inferred.push("object");
      if (has(["items", "prefixItems", "minItems", "maxItems"])) inferred.push("array");
      if (has(["minLength", "maxLength", "pattern", "format"])) inferred.push("string");
      if (has(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]))
        inferred.push("number");
      if (inferred.length === 0 && Object.keys(s).some((k) => !ANNOTATIONS.has(k))) this.loose();
      return inferred;
    }
    const list = Array.isArray(t) ? t : [t];
    for (const x of list)
      if (
        typeof x !== "string" ||
        !["string", "number", "integer", "boolean", "null", "object", "array"].includes(x)
      )
        throw new UnsupportedSchema(`${path}.type`, `the type ${JSON.stringify(x)}`);
    // integer and number together: number covers both.
    return (list as string[]).filter((x) => !(x === "integer" && list.includes("number")));
  }

  private typed(type: string, s: Schema, path: string, depth: number): string {
    for (const k of Object.keys(s)) {
      if (ANNOTATIONS.has(k) || HELD.any!.has(k)) continue;
      const held = HELD[type]?.has(k);
      const elsewhere = Object.entries(HELD).some(([t, keys]) => t !== type && keys.has(k));
      if (!held && !elsewhere && !k.startsWith("x-")) this.loose();
    }
    switch (type) {
      case "null":
        return this.base("null");
      case "boolean":
        return this.base("boolean");
      case "integer":
        return this.integer(s, path);
      case "number":
        return this.number(s, path);
      case "string":
        return this.string(s, path);
      case "array":
        return this.array(s, path, depth);
      default:
        return this.object(s, path, depth);
    }
  }

  private bound(s: Schema, key: string, path: string): number | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v))
      throw new UnsupportedSchema(`${path}.${key}`, `${key} ${JSON.stringify(v)} (not a number)`);
    return v;
  }

  private integer(s: Schema, path: string): string {
    const min = this.bound(s, "minimum", path);
    const max = this.bound(s, "maximum", path);
    const xmin = this.bound(s, "exclusiveMinimum", path);
    const xmax = this.bound(s, "exclusiveMaximum", path);
    if ([min, max, xmin, xmax].every((v) => v === undefined)) return this.base("integer");
    let lo = -INTEGER_LIMIT;
    let hi = INTEGER_LIMIT;
    if (min !== undefined) lo = Math.max(lo, Math.ceil(min));
    if (xmin !== undefined) lo = Math.max(lo, Math.floor(xmin) + 1);
    if (max !== undefined) hi = Math.min(hi, Math.floor(max));
    if (xmax !== undefined) hi = Math.min(hi, Math.ceil(xmax) - 1);
    const rule = integerRange(lo, hi);
    if (!rule)
      throw new UnsupportedSchema(
        path,
        `an integer range with no integer in it that a grammar can write (from ${lo} to ${hi}, within ±${INTEGER_LIMIT})`,
      );
    return this.add(`int-${path}`, rule);
  }

  private number(s: Schema, path: string): string {
    const min = this.bound(s, "minimum", path);
    const max = this.bound(s, "maximum", path);
    const xmin = this.bound(s, "exclusiveMinimum", path);
    const xmax = this.bound(s, "exclusiveMaximum", path);
    if ([min, max, xmin, xmax].every((v) => v === undefined)) return this.base("number");
    // Exclusive bounds are written as inclusive ones; validation turns the bound itself away.
    if (xmin !== undefined || xmax !== undefined) this.loose();
    const lo = Math.max(-INTEGER_LIMIT, ...[min, xmin].filter((v): v is number => v !== undefined));
    const hi = Math.min(INTEGER_LIMIT, ...[max, xmax].filter((v): v is number => v !== undefined));
    if (lo > hi) throw new UnsupportedSchema(path, `a number range with nothing in it (from ${lo} to ${hi})`);
    const rule = decimalRange(lo, hi);
    if (!rule) {
      this.loose();
      return this.base("number");
    }
    return this.add(`num-${path}`, rule);
  }

  private count(s: Schema, key: string, path: string): number | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (!Number.isSafeInteger(v) || (v as number) < 0)
      throw new UnsupportedSchema(`${path}.${key}`, `${key} ${JSON.stringify(v)} (not a count)`);
    return v as number;
  }

  /** min/max counts for a repetition, with maxima past MAX_COUNT left to validation. */
  private counts(s: Schema, minKey: string, maxKey: string, path: string): [number, number | undefined] {
    const min = this.count(s, minKey, path) ?? 0;
    let max = this.count(s, maxKey, path);
    if (max !== undefined && max < min)
      throw new UnsupportedSchema(path, `${maxKey} ${max} below ${minKey} ${min} (no value satisfies it)`);
    if (min > MAX_COUNT)
      throw new UnsupportedSchema(`${path}.${minKey}`, `${minKey} ${min} (at most ${MAX_COUNT})`);
    if (max !== undefined && max > MAX_COUNT) {
      this.loose();
      max = undefined;
    }
    return [min, max];
  }

  private string(s: Schema, path: string): string {
    const format = s.format;
    if (format !== undefined && typeof format !== "string")
      throw new UnsupportedSchema(`${path}.format`, `format ${JSON.stringify(format)}`);
    const grammar = format !== undefined ? FORMATS[format] : undefined;
    if (grammar) {
      if ("pattern" in s || "minLength" in s || "maxLength" in s) this.loose();
      for (const used of grammar.match(/\b(date|time|hex|host|octet)\b/g) ?? []) {
        this.base(used);
        this.needs.text(literalTexts(FORMAT_RULES[used]!));
      }
      this.needs.text(literalTexts(grammar));
      return this.add(`fmt-${format}`, grammar);
    }
    // A format no grammar here writes (ajv checks it when it knows it).
    if (format !== undefined) this.loose();
    const [min, max] = this.counts(s, "minLength", "maxLength", path);
    if (s.pattern !== undefined) {
      if (typeof s.pattern !== "string")
        throw new UnsupportedSchema(`${path}.pattern`, "a pattern that is not a string");
      if (min > 0 || max !== undefined) this.loose();
      try {
        return this.add(`pat-${path}`, patternGrammar(s.pattern, this.base("char"), this.needs));
      } catch (err) {
        if (!(err instanceof UnsupportedPattern)) throw err;
        throw new UnsupportedSchema(
          `${path}.pattern`,
          `the pattern ${JSON.stringify(s.pattern)}: ${err.message} cannot be written as a grammar`,
        );
      }
    }
    if (min === 0 && max === undefined) return this.base("string");
    return this.add(`str-${path}`, `"\\"" ${repetition(this.base("char"), min, max)} "\\""`);
  }

  private array(s: Schema, path: string, depth: number): string {
    const ws = this.base("ws");
    const [min, max] = this.counts(s, "minItems", "maxItems", path);
    const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : [];
    const items = s.items ?? s.additionalItems;
    const parts = prefix.map((p, i) => this.gen(p, `${path}.prefixItems[${i}]`, depth + 1));
    if (max !== undefined && parts.length > max)
      throw new UnsupportedSchema(path, `${parts.length} prefixItems but maxItems ${max}`);
    // Further items: as `items` says (none for false); unconstrained ones only when minItems asks.
    const restMin = Math.max(0, min - parts.length);
    const restMax = max === undefined ? undefined : max - parts.length;
    const sep = `"," ${ws}`;
    let item: string | undefined;
    let upTo = restMax;
    if (items === false) {
      if (restMin > 0)
        throw new UnsupportedSchema(
          path,
          `minItems ${min} beyond the ${parts.length} prefixItems with items false`,
        );
    } else if (items !== undefined || restMin > 0) {
      item = this.gen(items ?? true, `${path}.items`, depth + 1);
      if (items === undefined) upTo = restMin;
    }
    let body: string;
    if (parts.length === 0) body = item ? repetition(item, restMin, upTo, sep) : "";
    else {
      body = parts.join(` ${sep} `);
      if (item && upTo !== 0) {
        const more = repetition(item, Math.max(1, restMin), upTo, sep);
        body += restMin > 0 ? ` ${sep} ${more}` : ` ( ${sep} ${more} )?`;
      }
    }
    return this.add(`arr-${path}`, `"[" ${ws} ${body ? `${body} ` : ""}${ws} "]"`);
  }

  private object(s: Schema, path: string, depth: number): string {
    const ws = this.base("ws");
    const props = isObject(s.properties) ? s.properties : {};
    if (s.properties !== undefined && !isObject(s.properties))
      throw new UnsupportedSchema(`${path}.properties`, "properties that are not an object");
    const required = new Set(Array.isArray(s.required) ? s.required.map(String) : []);
    const extra = s.additionalProperties;
    const entries: { key: string; schema: unknown; required: boolean }[] = [];
    for (const [key, sub] of Object.entries(props)) {
      if (sub === false) {
        if (required.has(key))
          throw new UnsupportedSchema(
            `${path}.properties.${key}`,
            "a required property whose schema is false",
          );
        continue;
      }
      entries.push({ key, schema: sub, required: required.has(key) });
    }
    for (const key of required) {
      if (key in props) continue;
      if (extra === false)
        throw new UnsupportedSchema(
          `${path}.required`,
          `'${key}' is required but not among the properties, and additionalProperties is false`,
        );
      entries.push({ key, schema: isObject(extra) ? extra : true, required: true });
    }
    if (entries.length === 0) {
      if (extra === false) return this.add(`obj-${path}`, `"{" ${ws} "}"`);
      // A map: any keys, values as additionalProperties says.
      const [min, max] = this.counts(s, "minProperties", "maxProperties", path);
      const value = this.gen(extra ?? true, `${path}.additionalProperties`, depth + 1);
      const kv = this.add(`kv-${path}`, `${this.base("string")} ":" ${ws} ${value}`);
      if (min > 0 || max !== undefined) this.loose(); // keys may repeat
      const body = repetition(kv, min, max, `"," ${ws}`);
      return this.add(`map-${path}`, `"{" ${ws} ${body ? `${body} ` : ""}${ws} "}"`);
    }
    if ("minProperties" in s || "maxProperties" in s) this.loose();
    const kvs = entries.map((e) =>
      this.add(
        `kv-${path}-${e.key}`,
        `${literal(JSON.stringify(e.key))} ":" ${ws} ${this.gen(e.schema, `${path}.properties.${e.key}`, depth + 1)}`,
      ),
    );
    for (const e of entries) this.needs.text(JSON.stringify(e.key));
    // Properties in schema order; required ones always, optional ones or not. tail(i, first):
    // the properties from i on, `first` when none was written yet (so no comma before).
    const tails = new Map<string, string>();
    const tail = (i: number, first: boolean): string => {
      if (i === entries.length) return "";
      const key = `${i}:${first}`;
      const known = tails.get(key);
      if (known !== undefined) return known;
      const comma = first ? "" : `"," ${ws} `;
      const next = tail(i + 1, false);
      const present = `${comma}${kvs[i]}${next ? ` ${next}` : ""}`;
      let body: string;
      if (entries[i]!.required) body = present;
      else {
        const absent = tail(i + 1, first);
        body = absent ? `( ${present} | ${absent} )` : `( ${present} )?`;
      }
      const name = this.add(`props-${path}-${i}`, body);
      tails.set(key, name);
      return name;
    };
    const body = tail(0, true);
    return this.add(`obj-${path}`, `"{" ${ws} ${body} ${ws} "}"`);
  }

  private constant(v: unknown): string {
    const text = JSON.stringify(v);
    if (text === undefined) throw new UnsupportedSchema("const", "a value JSON cannot write");
    this.needs.text(text);
    return literal(text);
  }
}

/** The texts of a GBNF body's quoted literals, for Needs. */
function literalTexts(gbnf: string): string {
  let out = "";
  for (const m of gbnf.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    const text = m[1]!;
    if (text.startsWith("\\")) continue; // an escaped quote: the string's own delimiter
    out += text;
  }
  return out;
}

/**
 * The grammar of `schema` (a normalized schema: schema-normalize.ts), refs resolved within it.
 * @throws UnsupportedSchema naming what neither a grammar nor validation can serve.
 */
export function schemaGrammar(schema: unknown, path = "schema"): SchemaGrammar {
  const b = new Builder(schema);
  const root = b.gen(schema, path, 0);
  b.rules.set("root", root);
  const gbnf = [...b.rules].map(([name, body]) => `${name} ::= ${body}`).join("\n");
  const problem = grammarProblem(b.rules);
  if (problem) throw new UnsupportedSchema(path, problem);
  return { gbnf, exact: b.exact, needs: b.needs };
}
