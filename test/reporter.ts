// A node:test reporter (used by test/run.ts next to the usual one) that collects what the usual
// reporters only count: every skipped test with its reason, and the test files that declared no
// test (node reports such a file as one passing test named after its path), and how long each
// file's top-level tests took. It writes one JSON object to its destination when the run ends.

interface TestEventData {
  name: string;
  nesting: number;
  file?: string;
  skip?: string | boolean;
  details?: { type?: string; duration_ms?: number };
}

export interface RunRecord {
  /** `file` is where the test is declared (a conformance module for the suites run through one). */
  skipped: { file: string; path: string[]; reason: string; suite: boolean }[];
  /** Names of the top-level tests that passed: a test file's path when it declared no test. */
  topLevelPassed: string[];
  /** Milliseconds of top-level tests per file, as `file` names it. */
  fileMs: Record<string, number>;
}

export default async function* collect(
  source: AsyncIterable<{ type: string; data: TestEventData }>,
): AsyncGenerator<string> {
  const record: RunRecord = { skipped: [], topLevelPassed: [], fileMs: {} };
  const names = new Map<string, string[]>();
  for await (const { type, data } of source) {
    const file = data.file ?? "";
    if (type === "test:start") {
      const stack = names.get(file) ?? [];
      stack.length = data.nesting;
      stack.push(data.name);
      names.set(file, stack);
    }
    if (type === "test:pass" && data.nesting === 0) record.topLevelPassed.push(data.name);
    if ((type === "test:pass" || type === "test:fail") && data.nesting === 0)
      record.fileMs[file] = (record.fileMs[file] ?? 0) + (data.details?.duration_ms ?? 0);
    if ((type === "test:pass" || type === "test:fail") && data.skip !== undefined) {
      const path = [...(names.get(file) ?? []).slice(0, data.nesting), data.name];
      const reason = typeof data.skip === "string" ? data.skip : "(no reason given)";
      record.skipped.push({ file, path, reason, suite: data.details?.type === "suite" });
    }
  }
  yield `${JSON.stringify(record)}\n`;
}
