// Every Redis Lua script of the job store documents its interface in its header: the KEYS it
// takes and every ARGV position its body reads, so a script cannot drift from its header (and
// from the TypeScript that calls it). The scripts take no KEYS: the store calls them with 0 keys.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT } from "../helpers/server.js";

const DIR = join(REPO_ROOT, "src", "jobs", "stores", "redis-lua");

interface Parsed {
  header: string[];
  body: string;
}

function parse(text: string): Parsed {
  const lines = text.split("\n");
  const end = lines.findIndex((l) => !l.startsWith("--"));
  return { header: lines.slice(0, end), body: lines.slice(end).join("\n") };
}

/** ARGV positions the header documents: "-- ARGV[n] …" and "-- ARGV[n..] …" (n and all after). */
function documented(header: readonly string[]): { each: Set<number>; from?: number } {
  const each = new Set<number>();
  let from: number | undefined;
  for (const line of header) {
    for (const m of line.matchAll(/ARGV\[(\d+)(\.\.)?\]/g)) {
      if (m[2]) from = Math.min(from ?? Number.POSITIVE_INFINITY, Number(m[1]));
      else each.add(Number(m[1]));
    }
  }
  return from === undefined ? { each } : { each, from };
}

/** Problems with one script: undocumented ARGV reads, KEYS use, a missing KEYS or Returns line. */
function problems(name: string, text: string): string[] {
  const { header, body } = parse(text);
  const out: string[] = [];
  if (!header.some((l) => /^-- KEYS: /.test(l))) out.push(`${name}: no "-- KEYS:" line in the header`);
  if (name !== "lib.lua" && !header.some((l) => /^-- Returns /.test(l)))
    out.push(`${name}: no "-- Returns" line in the header`);
  if (/\bKEYS\[/.test(body)) out.push(`${name}: reads KEYS, but the store passes none`);
  const doc = documented(header);
  const code = body.replace(/--.*$/gm, "");
  for (const m of code.matchAll(/ARGV\[(\d+)\]/g)) {
    const n = Number(m[1]);
    if (!doc.each.has(n) && !(doc.from !== undefined && n >= doc.from))
      out.push(`${name}: reads ARGV[${n}], which its header does not document`);
  }
  if (doc.from !== undefined && !/#ARGV/.test(code))
    out.push(`${name}: documents ARGV[${doc.from}..] but never reads past a fixed position (#ARGV)`);
  return out;
}

describe("the header check", () => {
  it("catches an undocumented ARGV, a KEYS read and a missing header line", () => {
    const bad = "-- Does a thing.\n-- ARGV[1] prefix\nlocal a, b = ARGV[2], KEYS[1]\n";
    assert.deepEqual(problems("x.lua", bad), [
      'x.lua: no "-- KEYS:" line in the header',
      'x.lua: no "-- Returns" line in the header',
      "x.lua: reads KEYS, but the store passes none",
      "x.lua: reads ARGV[2], which its header does not document",
    ]);
    const good =
      "-- KEYS: none\n-- ARGV[1] p\n-- ARGV[2..] rest\n-- Returns 1\nfor i = 2, #ARGV do x(ARGV[i], ARGV[3]) end\n";
    assert.deepEqual(problems("y.lua", good), []);
  });
});

describe("redis-lua/*.lua", () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith(".lua"));

  it("holds lib.lua and the store's scripts", () => {
    assert.ok(files.includes("lib.lua"));
    assert.ok(files.length >= 9, files.join(", "));
  });

  it("each script's header documents its KEYS, every ARGV it reads, and what it returns", () => {
    const all = files.flatMap((f) => problems(f, readFileSync(join(DIR, f), "utf8")));
    assert.deepEqual(all, []);
  });

  it("the store loads exactly these scripts", () => {
    const store = readFileSync(join(REPO_ROOT, "src", "jobs", "stores", "redis-job-store.ts"), "utf8");
    const loaded = [...store.matchAll(/script\("([a-z-]+)"\)/g)].map((m) => `${m[1]}.lua`);
    assert.deepEqual([...loaded, "lib.lua"].sort(), [...files].sort());
  });
});
