// The layering of src/: every relative import of every source file (static, re-export and
// dynamic, type-only too) goes down the table below or stays within its own area, and no import
// circle exists among the files. The checker is tested on small graphs first, so a broken
// checker cannot pass the real tree.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

/**
 * Areas from the bottom up; an area may import its own files and any area in a lower rank.
 * An area is the longest matching prefix of a path under src/.
 */
const LAYERS: readonly (readonly string[])[] = [
  [
    "tensor.ts",
    "errors.ts",
    "cancel.ts",
    "version.ts",
    "sqlite.ts",
    "private-files.ts",
    "heap-growth.ts",
    "malloc-thresholds.ts",
    "yaml-depth.ts",
  ],
  // Payload capture's redaction paths: the config schema validates them. The body budget is
  // shared by both surfaces.
  ["golden.ts", "protocol/", "telemetry/", "capture/redact.ts", "body-budget.ts"],
  ["llm/", "notify/", "metrics/", "loadgen/", "tenants/", "shared-memory/"],
  ["config/"],
  ["storage/", "backends/"],
  ["runner/"],
  ["catalogue/served-model.ts"],
  ["lifecycle/"],
  ["catalogue/"],
  ["jobs/"],
  // The OpenAI Batch API: files and batches over the job queue and the blob store.
  ["batches/"],
  // Payload capture (docs/Capture.md): reads the catalogue and writes to storage; the routes call it.
  ["capture/"],
  // Two surfaces over the same catalogue; neither imports the other (what both need lives lower).
  ["server/", "grpc/"],
  ["cli/", "index.ts"],
];

type Graph = Map<string, string[]>;

function areaOf(file: string, layers: readonly (readonly string[])[]): { area: string; rank: number } {
  let best: { area: string; rank: number } | undefined;
  layers.forEach((areas, rank) => {
    for (const area of areas) {
      const match = area.endsWith("/") ? file.startsWith(area) : file === area;
      if (match && (!best || area.length > best.area.length)) best = { area, rank };
    }
  });
  if (!best) throw new Error(`${file} is in no layer; add its area to LAYERS`);
  return best;
}

/** "a.ts imports b.ts" lines for each import that goes up or sideways. */
function upwardImports(graph: Graph, layers: readonly (readonly string[])[]): string[] {
  const out: string[] = [];
  for (const [from, tos] of graph) {
    const a = areaOf(from, layers);
    for (const to of tos) {
      const b = areaOf(to, layers);
      if (a.area !== b.area && b.rank >= a.rank) out.push(`${from} imports ${to} (${a.area} → ${b.area})`);
    }
  }
  return out;
}

/** Every import circle, each as "a → b → a", found by depth-first search. */
function cycles(graph: Graph): string[] {
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const found: string[] = [];
  const visit = (file: string) => {
    state.set(file, "open");
    stack.push(file);
    for (const to of graph.get(file) ?? []) {
      if (state.get(to) === "open") found.push([...stack.slice(stack.indexOf(to)), to].join(" → "));
      else if (!state.has(to)) visit(to);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return found;
}

const SPECIFIER =
  /(?:^|[;\s])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?["'](\.{1,2}\/[^"']+)["']|import\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Relative imports of one file's text, as paths under src/ ("a/b.ts"). */
function importsOf(file: string, text: string): string[] {
  const out = new Set<string>();
  const code = text.replace(/^\s*\/\/.*$/gm, "");
  for (const m of code.matchAll(SPECIFIER)) {
    const spec = (m[1] ?? m[2])!;
    out.add(normalize(join(dirname(file), spec)).replace(/\.js$/, ".ts"));
  }
  return [...out];
}

const SRC = join(dirname(fileURLToPath(import.meta.url)), "../../../src");

function sourceGraph(): Graph {
  const graph: Graph = new Map();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
        const file = relative(SRC, path);
        graph.set(file, importsOf(file, readFileSync(path, "utf8")));
      }
    }
  };
  walk(SRC);
  return graph;
}

describe("the import checker", () => {
  const layers = [["low/"], ["high/"]];

  it("reads static, re-export, type-only and dynamic imports, resolving .js to .ts", () => {
    const text = [
      'import { a } from "../low/a.js";',
      'import type { B } from "./b.js";',
      'export { c } from "../low/c.js";',
      'const d = await import("../low/d.js");',
      '// import { e } from "../low/e.js";',
      'import { readFileSync } from "node:fs";',
    ].join("\n");
    assert.deepEqual(importsOf("high/x.ts", text).sort(), ["high/b.ts", "low/a.ts", "low/c.ts", "low/d.ts"]);
  });

  it("finds an upward import and allows a downward one", () => {
    const graph: Graph = new Map([
      ["high/x.ts", ["low/a.ts"]],
      ["low/a.ts", ["high/y.ts"]],
    ]);
    assert.deepEqual(upwardImports(graph, layers), ["low/a.ts imports high/y.ts (low/ → high/)"]);
  });

  it("finds a circle, also through several files", () => {
    const graph: Graph = new Map([
      ["low/a.ts", ["low/b.ts"]],
      ["low/b.ts", ["low/c.ts"]],
      ["low/c.ts", ["low/a.ts"]],
      ["low/d.ts", ["low/a.ts"]],
    ]);
    assert.deepEqual(cycles(graph), ["low/a.ts → low/b.ts → low/c.ts → low/a.ts"]);
    assert.deepEqual(cycles(new Map([["low/a.ts", ["low/b.ts"]]])), []);
  });
});

describe("src/ layering", () => {
  const graph = sourceGraph();

  it("reads the whole tree (every file, and the imports between them)", () => {
    assert.ok(graph.size > 100, `only ${graph.size} files under ${SRC}`);
    for (const [from, tos] of graph)
      for (const to of tos) assert.ok(graph.has(to), `${from} imports ${to}, which does not exist`);
  });

  it("has no upward import: lower layers never reach into server/, cli/ or a higher area", () => {
    assert.deepEqual(upwardImports(graph, LAYERS), []);
  });

  it("has no import circle", () => {
    assert.deepEqual(cycles(graph), []);
  });
});
