// Loaded with `node --import` by test/run.ts: a test that finishes without a single node:assert
// call fails ("no assertion ran"), unless it skipped itself. Every method of node:assert and
// node:assert/strict counts its calls for each test running at that moment (a test and the
// subtests inside it; the files' tests run one at a time), and an afterEach hook checks the count.
// Only method calls count (`assert.equal(...)`, `assert.ok(...)`), not a bare `assert(x)`.
import { createRequire, syncBuiltinESMExports } from "node:module";
import { afterEach, beforeEach } from "node:test";

interface Count {
  calls: number;
  skipped: boolean;
}

const require = createRequire(import.meta.url);
/** The tests running now (by context): each assertion counts for all of them. */
const open = new Map<object, Count>();

const modules = ["node:assert", "node:assert/strict"].map((id) => require(id) as Record<string, unknown>);
const originals = modules.map((module) => ({ ...module }));
const wrappers = modules.map(() => ({}) as Record<string, unknown>);

/** Puts the original methods back, or the counting wrappers. */
function install(which: "originals" | "wrappers"): void {
  modules.forEach((module, i) => {
    Object.assign(module, which === "originals" ? originals[i] : wrappers[i]);
  });
}

modules.forEach((module, i) => {
  for (const [name, fn] of Object.entries(module)) {
    if (typeof fn !== "function" || name === "strict" || /^[A-Z]/.test(name)) continue;
    const wrapper = function (this: unknown, ...args: unknown[]) {
      for (const count of open.values()) count.calls++;
      // node:assert compares some methods with its own exports (match vs doesNotMatch), so the
      // originals are in place while one runs.
      install("originals");
      try {
        return (fn as (...a: unknown[]) => unknown).apply(this, args);
      } catch (err) {
        // Point the failure at the test's line, not at this wrapper.
        if (err instanceof Error) Error.captureStackTrace(err, wrapper);
        throw err;
      } finally {
        install("wrappers");
      }
    };
    wrappers[i]![name] = wrapper;
  }
});
install("wrappers");
// Named imports (`import { equal } from "node:assert/strict"`) see the wrappers too.
syncBuiltinESMExports();

// Hooks registered here, before the test file loads, run around every test of the file at every
// depth (node:test's root hooks), without touching how tests are declared or where they point.

beforeEach((t: any) => {
  const count: Count = { calls: 0, skipped: false };
  open.set(t, count);
  for (const method of ["skip", "todo"] as const) {
    const original = t[method].bind(t);
    t[method] = (...args: unknown[]) => {
      count.skipped = true;
      return original(...args);
    };
  }
});

afterEach((t: any) => {
  const count = open.get(t);
  open.delete(t);
  if (count && !count.skipped && count.calls === 0) {
    throw new Error(`no assertion ran in test "${t.name}": a test must check something (see test/README.md)`);
  }
});
