// GET /ui: the dashboard (docs/Dashboard.md), a single page built from ui/ into dist/ui/ by
// `npm run build` and served from the package: no CDN, nothing fetched from elsewhere. The page and
// its bundle are public (`config.public`: they hold no data); every API call the page makes carries
// the key the page asks for. Files are read once; the page names the bundle with its content hash,
// so the bundle is cached for a year and the page is revalidated (ETag) on every load.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";

const HERE = dirname(fileURLToPath(import.meta.url));

/** dist/ui beside dist/src (the package), or the repository's dist/ui when run from src/. */
export function uiDirectory(): string | undefined {
  for (const dir of [join(HERE, "..", "..", "..", "ui"), join(HERE, "..", "..", "..", "dist", "ui")])
    if (existsSync(join(dir, "app.js")) && existsSync(join(dir, "index.html"))) return dir;
  return undefined;
}

/** Only this origin: scripts, styles and calls; no inline script, no frames, no forms elsewhere. */
export const UI_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

interface Asset {
  body: Buffer;
  type: string;
  hash: string;
}

const hashOf = (body: Buffer | string) => createHash("sha256").update(body).digest("hex").slice(0, 16);

function asset(body: Buffer, type: string): Asset {
  return { body, type, hash: hashOf(body) };
}

/** The page with each asset's hash in its URL (`%APP_JS%`, `%APP_CSS%` in ui/index.html). */
function loadAssets(dir: string): Record<"page" | "js" | "css", Asset> {
  const js = asset(readFileSync(join(dir, "app.js")), "text/javascript; charset=utf-8");
  const css = asset(readFileSync(join(dir, "app.css")), "text/css; charset=utf-8");
  const html = readFileSync(join(dir, "index.html"), "utf8")
    .replaceAll("%APP_JS%", js.hash)
    .replaceAll("%APP_CSS%", css.hash);
  return { page: asset(Buffer.from(html), "text/html; charset=utf-8"), js, css };
}

function send(request: FastifyRequest, reply: FastifyReply, a: Asset, immutable: boolean): Buffer | string {
  const etag = `"${a.hash}"`;
  reply
    .header("content-security-policy", UI_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("x-frame-options", "DENY")
    .header("etag", etag)
    .header("cache-control", immutable ? "public, max-age=31536000, immutable" : "no-cache");
  if (request.headers["if-none-match"] === etag) {
    reply.code(304);
    return "";
  }
  reply.type(a.type);
  return a.body;
}

export const uiRoutes: FastifyPluginAsync = async (app) => {
  const dir = uiDirectory();
  const assets = dir ? loadAssets(dir) : undefined;
  const config = { public: true };
  const missing = (reply: FastifyReply) =>
    reply
      .code(404)
      .type("text/plain; charset=utf-8")
      .send("the dashboard is not built: run `npm run build` (it bundles ui/ into dist/ui/)\n");
  app.get("/ui", { config }, async (request, reply) =>
    assets ? send(request, reply, assets.page, false) : missing(reply),
  );
  // Relative, so that behind a proxy serving modelport under a path prefix it still lands on the page.
  app.get("/ui/", { config }, async (_request, reply) => reply.redirect("../ui", 301));
  for (const [path, key] of [
    ["/ui/app.js", "js"],
    ["/ui/app.css", "css"],
  ] as const) {
    app.get<{ Querystring: { v?: string } }>(path, { config }, async (request, reply) => {
      if (!assets) return missing(reply);
      const a = assets[key];
      return send(request, reply, a, request.query.v === a.hash);
    });
  }
};
