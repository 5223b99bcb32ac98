#!/usr/bin/env node
// The modelport command; the code lives in dist/ (built by `npm run build`).
import { main } from "../dist/src/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === "number") process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`modelport: ${err?.stack ?? err}\n`);
    process.exitCode = 1;
  },
);
