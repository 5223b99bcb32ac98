// The JSON body parser: Fastify's own (prototype-poisoning checks included) behind a nesting
// depth check, so a deeply nested body is a 400 before any recursive code (validation, tensor
// decoding, the job store) walks it and overflows the stack.
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../errors.js";
import { jsonDepthExceeds } from "../protocol/json-depth.js";

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
