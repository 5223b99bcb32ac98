// The JSON body parser: Fastify's own (prototype-poisoning checks included) behind a nesting
// depth check, so a deeply nested body is a 400 before any recursive code (validation, tensor
// decoding, the job store) walks it and overflows the stack.
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../errors.js";

/**
 * True when arrays and objects in `text` nest deeper than `max`. One pass over the text,
 * skipping string contents; no allocation. Not a validator: malformed JSON is left to JSON.parse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  // Nesting deeper than `max` needs more than `max` opening brackets.
  if (text.length <= max) return false;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5b || c === 0x7b) {
      // [ {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      // ] }
      depth--;
    } else if (c === 0x22) {
      // a string: skip to its closing quote, stepping over escapes
      for (i++; i < n; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c) i++;
        else if (s === 0x22) break;
      }
    }
  }
  return false;
}

/** Replaces the application/json parser with one that refuses bodies nested deeper than `maxDepth`. */
export function registerJsonParser(app: FastifyInstance, maxDepth: number): void {
  const parse = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? "error",
    app.initialConfig.onConstructorPoisoning ?? "error",
  );
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (jsonDepthExceeds(body as string, maxDepth)) {
      done(
        new ModelportError(
          "MP_ERR_REQUEST_INVALID",
          `the JSON body nests arrays and objects deeper than ${maxDepth} levels (limits.maxJsonDepth)`,
        ),
        undefined,
      );
      return;
    }
    parse(request, body as string, done);
  });
}
