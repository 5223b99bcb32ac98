// The JSON body parser: Fastify's own (prototype-poisoning checks included) behind a nesting
// depth check, so a deeply nested body is a 400 before any recursive code (validation, tensor
// decoding, the job store) walks it and overflows the stack.
//
// Fastify's parser (secure-json-parse) runs JSON.parse and then two regular expressions over the
// whole text looking for "__proto__" and "constructor" keys, spelled plainly or with \u escapes:
// on a 19 KB tensor body those scans cost 40% on top of JSON.parse itself. A text without a
// backslash can only spell them plainly, so three native substring searches rule both out; only a
// text that fails them (or does not parse) goes through Fastify's parser, which then decides
// exactly as before (the same refusals and errors).
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../errors.js";
import { jsonDepthExceeds } from "../protocol/json-depth.js";
import { jsonErrorOffset } from "../protocol/json-error-offset.js";

export interface JsonParserOptions {
  /** Bodies nested deeper are refused (limits.maxJsonDepth). */
  maxDepth: number;
  /** Most bytes of a body, where a scope has its own limit; default the server's bodyLimit. */
  bodyLimit?: number;
  /** An empty or all-blank body is `{}`, not a 400 (management calls: clients send none). */
  emptyIsObject?: boolean;
}

/**
 * MP_ERR_REQUEST_MALFORMED_JSON for `text`, which JSON.parse refused with `err`: what is wrong and
 * where (line and column), said once.
 */
export function malformedJson(text: string, err: unknown): ModelportError {
  const raw = err instanceof Error ? err.message : String(err);
  // V8 words it "… in JSON at position N", "… after JSON at position N" or "Unexpected token 'x',
  // "<the text>" is not valid JSON": the what is kept, the where computed once as line and column.
  const what = raw
    .replace(/, (\.\.\.)?".*is not valid JSON$/s, "")
    .replace(/\s*(in|after) JSON at position \d+.*$/s, (m) =>
      m.includes("after") ? " after the JSON value" : "",
    )
    .replace(/\s*\(line \d+ column \d+\)$/, "");
  const pos = jsonErrorOffset(text);
  const before = text.slice(0, pos);
  const line = before.split("\n").length;
  const column = pos - before.lastIndexOf("\n");
  const where = pos >= text.length ? "; the body ends too soon" : ` at line ${line}, column ${column}`;
  return new ModelportError("MP_ERR_REQUEST_MALFORMED_JSON", `the body is not valid JSON: ${what}${where}`, {
    position: pos,
    line,
    column,
  });
}

/**
 * Replaces the application/json parser (of `app`'s scope) with one that refuses bodies nested
 * deeper than `maxDepth`.
 */
export function registerJsonParser(app: FastifyInstance, options: JsonParserOptions): void {
  const { maxDepth, bodyLimit, emptyIsObject = false } = options;
  const parse = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? "error",
    app.initialConfig.onConstructorPoisoning ?? "error",
  );
  app.removeContentTypeParser("application/json");
  // An undefined bodyLimit is the server's (Fastify fills it in).
  app.addContentTypeParser("application/json", { parseAs: "string", bodyLimit }, (request, body, done) => {
    const text = body as string;
    if (emptyIsObject && text.trim() === "") {
      done(null, {});
      return;
    }
    if (jsonDepthExceeds(text, maxDepth)) {
      done(
        new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `the JSON body nests arrays and objects deeper than ${maxDepth} levels (limits.maxJsonDepth)`,
        ),
        undefined,
      );
      return;
    }
    // Fastify's parser decides (a byte-order mark, poisoned keys, an empty body); a body that is
    // not JSON is then said here, once, with where.
    const fastifyParse = () =>
      parse(request, text, (err, value) => {
        if (!err || text.trim() === "") return done(err, value);
        try {
          JSON.parse(text.replace(/^\uFEFF/, ""));
        } catch (syntax) {
          return done(malformedJson(text, syntax), undefined);
        }
        // Valid JSON that Fastify refused: a poisoned key, worded by Fastify.
        done(err, value);
      });
    if (!text.includes("\\") && !text.includes("__proto__") && !text.includes("constructor")) {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        fastifyParse();
        return;
      }
      done(null, value);
      return;
    }
    fastifyParse();
  });
}
