// `npm run build` step for the dashboard (after `tsc -p ui` type-checks ui/ with its own
// tsconfig, DOM types): bundles ui/src/main.ts with Preact and htm into one minified dist/ui/app.js (no CDN at run
// time) and copies the page and the style sheet beside it; src/server/routes/ui.ts serves them.
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const HERE = dirname(fileURLToPath(import.meta.url));
const OUT = join(HERE, "..", "dist", "ui");
mkdirSync(OUT, { recursive: true });
await build({
  entryPoints: [join(HERE, "src", "main.ts")],
  outfile: join(OUT, "app.js"),
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  legalComments: "none",
  logLevel: "warning",
});
copyFileSync(join(HERE, "index.html"), join(OUT, "index.html"));
copyFileSync(join(HERE, "app.css"), join(OUT, "app.css"));
console.log(`dist/ui/app.js ${statSync(join(OUT, "app.js")).size} bytes`);
