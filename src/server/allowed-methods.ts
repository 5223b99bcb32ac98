// The methods each registered route pattern answers, so that a path served under another method
// is answered 405 with `Allow` (RFC 9110), not 404 as if nothing lived there.

/** A route pattern (`/v1/models/:model/predict`) as a regular expression over a path. */
function patternRegex(url: string): RegExp {
  const source = url
    .split(/(:\w+(?:\([^)]*\))?|\*)/)
    .map((part, i) =>
      i % 2 === 1 ? (part === "*" ? ".*" : "[^/]+") : part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"),
    )
    .join("");
  return new RegExp(`^${source}$`);
}

export class AllowedMethods {
  private readonly routes = new Map<string, { re: RegExp; methods: Set<string> }>();

  /** Records that `url` (a route pattern) answers `methods`; GET brings HEAD, as Fastify does. */
  add(methods: string | string[], url: string): void {
    let route = this.routes.get(url);
    if (!route) {
      route = { re: patternRegex(url), methods: new Set() };
      this.routes.set(url, route);
    }
    for (const m of [methods].flat()) {
      route.methods.add(m);
      if (m === "GET") route.methods.add("HEAD");
    }
  }

  /** The methods some route answers on `path`, sorted; empty when no route matches it at all. */
  of(path: string): string[] {
    const out = new Set<string>();
    for (const { re, methods } of this.routes.values())
      if (re.test(path)) for (const m of methods) out.add(m);
    return [...out].sort();
  }
}
