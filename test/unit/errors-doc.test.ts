// docs/Errors.md and the error table in src/errors.ts must list the same codes with the same
// HTTP status, retryability and "another runner" (tryElsewhere); its "Does a retry help?" section
// gives each code once, under the answer its retryable flag gives.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ERRORS, type ErrorSpec, TRY_ELSEWHERE } from "../../src/errors.js";
import { REPO_ROOT } from "../helpers/server.js";

describe("docs/Errors.md", () => {
  const doc = readFileSync(join(REPO_ROOT, "docs", "Errors.md"), "utf8");
  const rows = new Map<string, { status: number; retryable: boolean; tryElsewhere: boolean }>();
  for (const m of doc.matchAll(
    /^\| `(MP_ERR_[A-Z_]+)`\s*\|\s*(\d{3})\s*\|\s*(yes|no)\s*\|\s*(yes|no)\s*\|/gm,
  )) {
    rows.set(m[1]!, { status: Number(m[2]), retryable: m[3] === "yes", tryElsewhere: m[4] === "yes" });
  }

  it("documents every code in the table with its status, retryability and another-runner column", () => {
    for (const [code, spec] of Object.entries(ERRORS) as [string, ErrorSpec][]) {
      assert.deepEqual(
        rows.get(code),
        { status: spec.status, retryable: spec.retryable, tryElsewhere: spec.tryElsewhere === true },
        `${code} in docs/Errors.md`,
      );
    }
  });

  it("documents no code the table lacks", () => {
    for (const code of rows.keys())
      assert.ok(code in ERRORS, `${code} is in docs/Errors.md but not in src/errors.ts`);
    for (const m of doc.matchAll(/MP_ERR_[A-Z_]+/g))
      assert.ok(m[0] in ERRORS, `${m[0]} mentioned in docs/Errors.md is unknown`);
  });

  it("another runner is tried only for retryable codes, and TRY_ELSEWHERE is that column", () => {
    const marked = (Object.entries(ERRORS) as [string, ErrorSpec][]).filter(([, s]) => s.tryElsewhere);
    assert.deepEqual(new Set(marked.map(([code]) => code)), TRY_ELSEWHERE);
    for (const [code, spec] of marked)
      assert.ok(spec.retryable, `${code} is tried elsewhere but not retryable`);
    assert.ok(TRY_ELSEWHERE.has("MP_ERR_MODEL_NOT_READY") && !TRY_ELSEWHERE.has("MP_ERR_INPUT_SHAPE"));
  });

  it("codes follow MP_ERR_<AREA>_<WHAT> and statuses are HTTP errors", () => {
    for (const [code, spec] of Object.entries(ERRORS)) {
      assert.match(code, /^MP_ERR_[A-Z]+_[A-Z_]+$/);
      assert.ok(spec.status >= 400 && spec.status < 600, code);
    }
  });

  it('"Does a retry help?" lists every code once, under Yes exactly when it is retryable', () => {
    const section = doc.slice(doc.indexOf("## Does a retry help?"));
    const yesAt = section.indexOf("### Yes");
    const noAt = section.indexOf("### No");
    assert.ok(yesAt > 0 && noAt > yesAt, "the section has a Yes and a No part");
    const codes = (text: string) => [...text.matchAll(/`(MP_ERR_[A-Z_]+)`/g)].map((m) => m[1]!);
    const yes = codes(section.slice(yesAt, noAt));
    const no = codes(section.slice(noAt));
    const listed = [...yes, ...no];
    assert.equal(new Set(listed).size, listed.length, "no code is listed twice");
    for (const [code, spec] of Object.entries(ERRORS) as [string, ErrorSpec][]) {
      assert.ok(listed.includes(code), `${code} is missing from "Does a retry help?"`);
      assert.equal(
        yes.includes(code),
        spec.retryable,
        `${code} is listed under ${yes.includes(code) ? "Yes" : "No"}`,
      );
    }
  });
});
