// CI speed on a machine that cannot reach GitHub: better-sqlite3's install (prebuild-install)
// downloads a prebuilt binary from GitHub releases and, failing that, compiles SQLite for ~75 s.
// After an install, this keeps the compiled binary where prebuild-install looks for a cached
// download (<npm cache>/_prebuilds/, keyed by the release URL), so the next install on this
// machine unpacks it instead of compiling. It changes nothing where the download works.
// Usage (from the repository root, after `npm ci`; .ci/run does): node .ci/sqlite-prebuild-cache.mjs
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { homedir } from "node:os";
import { basename, join } from "node:path";

const pkg = join("node_modules", "better-sqlite3");
const binary = join(pkg, "build", "Release", "better_sqlite3.node");
const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
// prebuild-install's URL for this Node ABI and platform (glibc: no libc suffix), and its cache key.
const url = `https://github.com/WiseLibs/better-sqlite3/releases/download/v${version}/better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
const digest = createHash("sha512").update(url).digest("hex").slice(0, 6);
const cache = join(process.env.npm_config_cache ?? join(homedir(), ".npm"), "_prebuilds");
const file = join(cache, `${digest}-${basename(url).replace(/[^a-zA-Z0-9.]+/g, "-")}`);
if (existsSync(file) || !existsSync(binary)) process.exit(0);
mkdirSync(cache, { recursive: true });
execFileSync("tar", ["czf", `${file}.tmp`, "-C", pkg, "build/Release/better_sqlite3.node"]);
renameSync(`${file}.tmp`, file);
console.log(`better-sqlite3 ${version}: the compiled binary is cached for the next install (${file})`);
