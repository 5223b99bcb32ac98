// Structure-aware generators for the fuzz suite: valid requests for the example models, and
// mutations of any JSON value (wrong types, boundary and huge numbers, wrong shapes, deep
// nesting, unicode, prototype keys, deleted and unknown keys), plus mutations of JSON text
// (NaN and Infinity tokens, truncation, garbage, empty bodies) that JSON.stringify cannot make.
import fc from "fast-check";

export type Json = null | boolean | number | string | Deep | Json[] | { [key: string]: Json };

/**
 * Nesting `depth` deep around a leaf, kept as a marker and written out by `encode`: V8's
 * JSON.stringify and structuredClone overflow the stack a few thousand levels down, and so does
 * fast-check's printer, while JSON.parse (the server's) does not.
 */
export class Deep {
  constructor(
    readonly depth: number,
    readonly leaf: string,
    readonly objects: boolean,
  ) {}
  [fc.toStringMethod](): string {
    return `nest(${this.depth}, ${this.leaf}, ${this.objects ? "objects" : "arrays"})`;
  }
}

/** `v` with Deep markers made real nested values (for writers other than `encode`). */
export function materialize(v: Json): unknown {
  if (v instanceof Deep) return JSON.parse(encode(v));
  if (Array.isArray(v)) return v.map(materialize);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v))
      Object.defineProperty(out, k, {
        value: materialize(v[k]!),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return v;
}

/** JSON text of `v`, with Deep markers written out. */
export function encode(v: Json | undefined): string {
  if (v instanceof Deep) {
    return v.objects
      ? '{"a":'.repeat(v.depth) + v.leaf + "}".repeat(v.depth)
      : "[".repeat(v.depth) + v.leaf + "]".repeat(v.depth);
  }
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? "null" : encode(x))).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${encode(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

/** Deepest nesting the generators build. */
export const DEEP_MAX = 20_000;

/** Numbers at the edges: zero signs, integer and float limits, the first unsafe integer. */
export const edgeNumber: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    -1,
    1,
    0.5,
    255,
    256,
    -129,
    2 ** 31,
    -(2 ** 31) - 1,
    2 ** 32,
    2 ** 53,
    2 ** 53 + 2,
    -(2 ** 53) - 2,
    2 ** 64,
    1e308,
    -1e308,
    5e-324,
    Number.MAX_SAFE_INTEGER,
  ),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);

/** Strings that have broken parsers: unicode of every kind, lone surrogates, NUL, long runs. */
export const edgeString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 20 }),
  fc.string({ unit: "binary", maxLength: 20 }),
  fc.constantFrom(
    "",
    "NaN",
    "Infinity",
    "-1",
    "1e999",
    "\u0000",
    "\ud800",
    "\udfff\ud800",
    "\u202e",
    "🦀",
    "FP32",
    "BYTES",
    "__proto__",
    "constructor",
    "x".repeat(5000),
  ),
);

/** `s` with lone surrogates replaced (encodeURIComponent throws on them). */
export const wellFormed = (s: string): string => Buffer.from(s, "utf8").toString("utf8");

/** `s` with only what Node's HTTP client sends in a header value: tab, printable ASCII, Latin-1. */
export const headerSafe = (s: string): string => s.replace(/[^\t\x20-\x7e\xa0-\xff]/g, "");

/** Arrays or objects nested 2 to `max` deep. */
export const deep = (max = DEEP_MAX): fc.Arbitrary<Json> =>
  fc
    .tuple(fc.integer({ min: 2, max }), fc.boolean(), fc.constantFrom("1", "null", '"x"', "[]", "{}"))
    .map(([d, objects, leaf]) => new Deep(d, leaf, objects));

/** An object whose own keys include the prototype-pollution ones (JSON.parse makes own keys). */
export const protoObject: fc.Arbitrary<Json> = fc
  .constantFrom(
    '{"__proto__": {"polluted": 1}}',
    '{"constructor": {"prototype": {"polluted": 1}}}',
    '{"prototype": 1, "toString": 1, "hasOwnProperty": 2}',
    '{"__proto__": null}',
    '{"valueOf": {}, "constructor": 1}',
  )
  .map((t) => JSON.parse(t) as Json);

/** One value of any kind that does not belong where it is put; nesting up to `maxDepth`. */
export const nasty = (maxDepth = DEEP_MAX): fc.Arbitrary<Json> =>
  fc.oneof(
    { arbitrary: edgeNumber, weight: 4 },
    { arbitrary: edgeString, weight: 3 },
    { arbitrary: fc.constantFrom<Json>(null, true, false, [], {}, [[]], [null], [{}]), weight: 3 },
    { arbitrary: protoObject, weight: 1 },
    { arbitrary: deep(maxDepth), weight: 1 },
    {
      arbitrary: fc
        .integer({ min: 0, max: 3000 })
        .map((n) => Array.from({ length: n }, (_, i) => i % 7) as Json),
      weight: 1,
    },
    { arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>, weight: 2 },
  );

type Path = (string | number)[];

function paths(v: Json, at: Path = [], out: Path[] = []): Path[] {
  out.push(at);
  if (out.length > 200) return out;
  if (Array.isArray(v)) {
    for (let i = 0; i < Math.min(v.length, 20); i++) paths(v[i]!, [...at, i], out);
  } else if (v && typeof v === "object" && !(v instanceof Deep))
    for (const k of Object.keys(v)) paths(v[k]!, [...at, k], out);
  return out;
}

/** A deep copy (Deep markers are immutable and shared; own "__proto__" keys stay own keys). */
export function clone(v: Json): Json {
  if (Array.isArray(v)) return v.map(clone);
  if (v && typeof v === "object" && !(v instanceof Deep)) {
    const out: Record<string, Json> = {};
    for (const k of Object.keys(v)) put(out, k, clone(v[k]!));
    return out;
  }
  return v;
}

function get(root: Json, path: Path): Json {
  let v: Json = root;
  for (const p of path) v = (v as Record<string | number, Json>)[p]!;
  return v;
}

/** Sets with defineProperty, so "__proto__" becomes an own key as JSON.parse would make it. */
function put(obj: Json, key: string | number, value: Json): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

const KEYS = fc.oneof(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "prototype",
    "toString",
    "data",
    "shape",
    "datatype",
    "rows",
    "inputs",
    "parameters",
    "id",
    "outputs",
    "model",
    "",
  ),
  fc.string({ unit: "grapheme", maxLength: 12 }),
);

const op = (maxDepth: number) =>
  fc.record({
    kind: fc.constantFrom(
      "replace",
      "replace",
      "replace",
      "delete",
      "addKey",
      "duplicate",
      "wrap",
      "number",
      "empty",
    ),
    at: fc.nat(),
    value: nasty(maxDepth),
    key: KEYS,
  });

function apply(root: Json, op: { kind: string; at: number; value: Json; key: string }): Json {
  // A copy: fc.constantFrom hands out the same [[]] and {} every time, and mutating them in place
  // would change later cases (and can make a value contain itself).
  const m = { ...op, value: clone(op.value) };
  const all = paths(root);
  const path = all[m.at % all.length]!;
  const target = get(root, path);
  const parent = path.length ? get(root, path.slice(0, -1)) : undefined;
  const last = path[path.length - 1];
  const replace = (v: Json): Json => {
    if (parent === undefined) return v;
    if (Array.isArray(parent)) parent[last as number] = v;
    else put(parent, last as string, v);
    return root;
  };
  switch (m.kind) {
    case "replace":
      return replace(m.value);
    case "delete":
      if (parent === undefined) return {};
      if (Array.isArray(parent)) parent.splice(last as number, 1);
      else delete (parent as Record<string, Json>)[last as string];
      return root;
    case "addKey":
      if (target && typeof target === "object" && !Array.isArray(target) && !(target instanceof Deep)) {
        put(target, m.key, m.value);
        return root;
      }
      return replace(m.value);
    case "duplicate":
      if (Array.isArray(target) && target.length > 0) {
        target.push(clone(target[m.at % target.length]!));
        return root;
      }
      return replace([target, target]);
    case "wrap":
      return replace(m.at % 2 ? [target] : { [m.key]: target });
    case "number":
      return replace(typeof target === "number" ? -target * 1e10 - 0.5 : 2 ** 53 + 2);
    default:
      return replace(Array.isArray(target) ? [] : target && typeof target === "object" ? {} : "");
  }
}

/** 1 to 3 mutations of `valid` (a fresh copy each time); nested values up to `maxDepth` deep. */
export function mutated(valid: fc.Arbitrary<Json>, maxDepth = DEEP_MAX): fc.Arbitrary<Json> {
  return fc.tuple(valid, fc.array(op(maxDepth), { minLength: 1, maxLength: 3 })).map(([v, ops]) => {
    let root = clone(v);
    for (const o of ops) root = apply(root, o);
    return root;
  });
}

/** JSON text mutations: number tokens JSON has not got, truncation, garbage, duplicates, BOM. */
export function mutatedText(valid: fc.Arbitrary<Json>): fc.Arbitrary<string> {
  return fc
    .tuple(
      valid,
      fc.constantFrom(
        "nan",
        "truncate",
        "garbage",
        "dupKey",
        "bom",
        "empty",
        "spaces",
        "trailing",
        "numbers",
      ),
      fc.nat(),
      fc.string({ unit: "binary", maxLength: 16 }),
    )
    .map(([v, kind, n, junk]) => {
      const text = encode(v);
      switch (kind) {
        case "nan": {
          const token = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "0x10", "01", ".5", "+1"][n % 9]!;
          return text.replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/, token);
        }
        case "truncate":
          return text.slice(0, n % (text.length + 1));
        case "garbage":
          return `${text.slice(0, n % (text.length + 1))}${junk}${text.slice(n % (text.length + 1))}`;
        case "dupKey":
          return text.replace(
            /^\{/,
            `{"${["rows", "inputs", "__proto__", "model"][n % 4]}": ${JSON.stringify(junk)},`,
          );
        case "bom":
          return `\ufeff${text}`;
        case "empty":
          return ["", " ", "null", "[]", '""', "0", "{}", "true"][n % 8]!;
        case "spaces":
          return `${" \t\n".repeat(n % 50)}${text}`;
        case "trailing":
          return `${text}${junk || "}"}`;
        default:
          return text.replace(
            /-?\d+(\.\d+)?/g,
            () => ["1e999", "-0", "1E+400", "123456789012345678901234567890"][n % 4]!,
          );
      }
    });
}

const finite = fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true });

/** `count` rows of `width` finite numbers. */
export const rows = (width: number, max = 4) =>
  fc.array(fc.array(finite, { minLength: width, maxLength: width }), { minLength: 1, maxLength: max });

/** A valid multi-io input set with `n` rows, as native named tensors. */
export function multiInputs(n: number) {
  return fc.record({
    a: fc.array(fc.array(finite, { minLength: 3, maxLength: 3 }), { minLength: n, maxLength: n }),
    b: fc.array(fc.array(finite, { minLength: 3, maxLength: 3 }), { minLength: n, maxLength: n }),
    ids: fc.array(fc.integer({ min: -1e9, max: 1e9 }), { minLength: n, maxLength: n }),
    mask: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
    pixels: fc.array(fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 }), {
      minLength: n,
      maxLength: n,
    }),
    scale: finite,
  });
}

/** Tensor models of the fuzz server: name → native input width (single-input models). */
export const WIDTHS = { tree: 6, mlp: 4, wide: 32 } as const;

/** A valid native predict body (rows or named tensors) for one of the example models. */
export const nativeBody: fc.Arbitrary<{ model: string; body: Json }> = fc.oneof(
  fc
    .tuple(fc.constantFrom("tree", "mlp", "wide"), fc.nat({ max: 3 }), fc.boolean())
    .chain(([model, n, named]) =>
      rows(WIDTHS[model as keyof typeof WIDTHS], n + 1).map((r) => ({
        model,
        body: (named
          ? { inputs: { features: { data: r.flat(), shape: [r.length, r[0]!.length] } } }
          : { rows: r }) as Json,
      })),
    ),
  fc
    .integer({ min: 1, max: 3 })
    .chain((n) => multiInputs(n).map((inputs) => ({ model: "multi", body: { inputs } as Json }))),
);

const OIP_TYPES: Record<string, Record<string, string>> = {
  tree: { features: "FP32" },
  mlp: { features: "FP32" },
  wide: { features: "FP32" },
  multi: { a: "FP32", b: "FP64", ids: "INT64", mask: "BOOL", pixels: "UINT8", scale: "FP32" },
};

/** A native named-tensor body as OIP inputs: [{name, shape, datatype, data}]. */
export function toOip(model: string, inputs: Record<string, unknown>): Json {
  return {
    inputs: Object.entries(inputs).map(([name, v]) => {
      const value = (
        v && typeof v === "object" && !Array.isArray(v) ? (v as { data: unknown }).data : v
      ) as Json;
      const shape: number[] = [];
      for (let p: unknown = value; Array.isArray(p); p = p[0]) shape.push(p.length);
      const given = (v as { shape?: number[] }).shape;
      const flat = Array.isArray(value) ? (value as Json[]).flat(8) : [value];
      return { name, datatype: OIP_TYPES[model]![name]!, shape: given ?? shape, data: flat } as Json;
    }),
  };
}

/** A valid OIP infer body for one of the example models. */
export const oipBody: fc.Arbitrary<{ model: string; body: Json }> = nativeBody.map(({ model, body }) => {
  const b = body as { rows?: number[][]; inputs?: Record<string, unknown> };
  return { model, body: toOip(model, b.inputs ?? { features: b.rows! }) };
});

/** Text for the OpenAI bodies: graphemes, words, edge cases. */
const openaiText = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.lorem({ maxCount: 8 }),
  edgeString,
);
/** Generation kept short so that thousands of cases stay cheap. */
const maxTokens = fc.integer({ min: 1, max: 3 });

/** A valid chat completions body for the example language model (tiny-llama). */
export const chatBody: fc.Arbitrary<Json> = fc.record(
  {
    model: fc.constant("tiny-llama"),
    messages: fc.array(
      fc.record({ role: fc.constantFrom("system", "user", "assistant"), content: openaiText }),
      {
        minLength: 1,
        maxLength: 3,
      },
    ),
    max_tokens: maxTokens,
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    stream: fc.boolean(),
    stop: fc.oneof(fc.constant(null), openaiText, fc.array(openaiText, { maxLength: 2 })),
    seed: fc.integer({ min: 0, max: 1000 }),
  },
  { requiredKeys: ["model", "messages", "max_tokens"] },
) as fc.Arbitrary<Json>;

/** A valid /v1/responses body for tiny-llama: a string or items, tools, formats, stored or not. */
export const responsesBody: fc.Arbitrary<Json> = fc.record(
  {
    model: fc.constant("tiny-llama"),
    input: fc.oneof(
      openaiText,
      fc.array(
        fc.oneof(
          fc.record({
            role: fc.constantFrom("system", "user", "assistant", "developer"),
            content: openaiText,
          }),
          fc.record({
            type: fc.constant("message"),
            role: fc.constant("user"),
            content: fc.array(fc.record({ type: fc.constant("input_text"), text: openaiText }), {
              maxLength: 2,
            }),
          }),
          fc.record({
            type: fc.constant("function_call"),
            call_id: fc.constant("c1"),
            name: fc.constant("f"),
            arguments: fc.constant("{}"),
          }),
          fc.record({
            type: fc.constant("function_call_output"),
            call_id: fc.constant("c1"),
            output: openaiText,
          }),
        ),
        { minLength: 1, maxLength: 3 },
      ),
    ),
    instructions: openaiText,
    max_output_tokens: maxTokens,
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    tools: fc.constant([{ type: "function", name: "f", parameters: { type: "object", properties: {} } }]),
    tool_choice: fc.constantFrom("auto", "none", "required", { type: "function", name: "f" }),
    text: fc.constantFrom({ format: { type: "text" } }, { format: { type: "json_object" } }),
    stream: fc.boolean(),
    store: fc.boolean(),
  },
  { requiredKeys: ["model", "input", "max_output_tokens"] },
) as unknown as fc.Arbitrary<Json>;

/** A valid completions body for tiny-llama. */
export const completionBody: fc.Arbitrary<Json> = fc.record(
  {
    model: fc.constant("tiny-llama"),
    prompt: openaiText,
    max_tokens: maxTokens,
    stream: fc.boolean(),
    echo: fc.boolean(),
  },
  { requiredKeys: ["model", "prompt", "max_tokens"] },
) as fc.Arbitrary<Json>;

/** A valid embeddings body for the example embeddings model (tiny-embed). */
export const embeddingBody: fc.Arbitrary<Json> = fc.record(
  {
    model: fc.constant("tiny-embed"),
    input: fc.oneof(openaiText, fc.array(openaiText, { minLength: 1, maxLength: 4 })),
    encoding_format: fc.constantFrom("float", "base64"),
  },
  { requiredKeys: ["model", "input"] },
) as fc.Arbitrary<Json>;

/**
 * Mutations may turn max_tokens into anything; a huge one would make a case slow (never wrong),
 * so a number there is clamped to 3 after mutating: the property still sees every other change.
 */
export function keepShort(body: Json): Json {
  if (body && typeof body === "object" && !Array.isArray(body)) {
    for (const k of ["max_tokens", "max_completion_tokens", "max_output_tokens"]) {
      const v = (body as Record<string, Json>)[k];
      if (typeof v === "number" && Number.isInteger(v) && v > 3) (body as Record<string, Json>)[k] = 3;
    }
  }
  return body;
}
