// One value per query parameter, on every route. Fastify's query-string parser turns a parameter
// given twice into an array, which no route expects: a job store bound it as one SQL value (a 500,
// "Too many parameter values"), filters compared it as a string. Refused here, before any route
// reads its query, with 400 MP_ERR_REQUEST_INVALID naming the parameter in `details.param`; the
// error goes to the scope of the route reached, so it comes in that route's shape (native, OIP,
// OpenAI). A list is one comma-separated value (`?outputs=a,b`, `?group_by=key,model`).
import type { FastifyInstance } from "fastify";
import { ModelportError } from "../../errors.js";

export function registerQueryCheck(app: FastifyInstance): void {
  // A callback hook: a request without a query string costs one loop over an empty object.
  app.addHook("onRequest", (request, _reply, done) => {
    const query = request.query as Record<string, unknown>;
    for (const name in query) {
      if (Array.isArray(query[name])) {
        done(
          new ModelportError(
            "MP_ERR_REQUEST_INVALID",
            `the query parameter '${name}' is given more than once; give it once (a list as one comma-separated value)`,
            { param: name },
          ),
        );
        return;
      }
    }
    done();
  });
}
