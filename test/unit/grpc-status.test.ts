// Every MP_ERR_* code gets the gRPC status docs/API.md's table gives for its HTTP status (never
// OK), and a failed call's status carries the code first in its message and in `mp-error-code`.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { status } from "@grpc/grpc-js";
import { ERRORS, type ErrorCode, ModelportError } from "../../src/errors.js";
import { ERROR_CODE_KEY, errorStatus, grpcCode, MAX_DETAILS_CHARS } from "../../src/grpc/status.js";
import { REPO_ROOT } from "../helpers/server.js";

/**
 * docs/API.md's table: explicit HTTP statuses, the row for "every other 4xx", the one for "any
 * other", and the codes a row names as exceptions ("`STATUS` for `MP_ERR_A` and `MP_ERR_B`").
 */
function documented(): {
  byStatus: Map<number, string>;
  other4xx: string;
  other: string;
  byCode: Map<string, string>;
} {
  const doc = readFileSync(join(REPO_ROOT, "docs", "API.md"), "utf8");
  const from = doc.indexOf("| HTTP status of the `MP_ERR_*` code");
  const section = doc.slice(from, doc.indexOf("\n\n", from));
  const byStatus = new Map<number, string>();
  const byCode = new Map<string, string>();
  let other4xx = "";
  let other = "";
  for (const m of section.matchAll(/^\| ([^|`]+?)\s*\| `([A-Z_]+)`([^|]*)\|$/gm)) {
    const [, statuses, code, note] = m as unknown as [string, string, string, string];
    if (/every other 4xx/.test(statuses)) other4xx = code;
    if (/any other/.test(statuses)) other = code;
    for (const s of statuses.match(/\b\d{3}\b/g) ?? []) byStatus.set(Number(s), code);
    for (const alt of note.matchAll(/`([A-Z_]+)` for ((?:`MP_ERR_[A-Z_]+`(?: and )?)+)/g))
      for (const named of alt[2]!.matchAll(/MP_ERR_[A-Z_]+/g)) byCode.set(named[0], alt[1]!);
  }
  return { byStatus, other4xx, other, byCode };
}

describe("gRPC statuses of the MP_ERR codes", () => {
  const doc = documented();

  it("reads the documented table", () => {
    assert.equal(doc.byStatus.get(401), "UNAUTHENTICATED");
    assert.equal(doc.other4xx, "INVALID_ARGUMENT");
    assert.equal(doc.other, "INTERNAL");
    assert.equal(doc.byCode.get("MP_ERR_JOB_IDEMPOTENCY_CONFLICT"), "ALREADY_EXISTS");
  });

  it("maps every code as documented, and none to OK", () => {
    for (const code of Object.keys(ERRORS) as ErrorCode[]) {
      const err = new ModelportError(code, "x");
      const want =
        doc.byCode.get(code) ??
        doc.byStatus.get(err.status) ??
        (err.status >= 400 && err.status < 500 ? doc.other4xx : doc.other);
      assert.equal(status[grpcCode(err)], want, `${code} (HTTP ${err.status})`);
      assert.notEqual(grpcCode(err), status.OK);
    }
  });

  it("puts the code first in the message and in the trailing metadata; retry-after on a retryable 503", () => {
    const shape = errorStatus(new ModelportError("MP_ERR_INPUT_SHAPE", "input 'x' has shape [2]"));
    assert.equal(shape.code, status.INVALID_ARGUMENT);
    assert.equal(shape.details, "MP_ERR_INPUT_SHAPE: input 'x' has shape [2]");
    assert.deepEqual(shape.metadata.get(ERROR_CODE_KEY), ["MP_ERR_INPUT_SHAPE"]);
    assert.deepEqual(shape.metadata.get("retry-after"), []);
    const busy = errorStatus(new ModelportError("MP_ERR_MODEL_OVERLOADED", "full", { retryAfterSeconds: 3 }));
    assert.equal(busy.code, status.UNAVAILABLE);
    assert.deepEqual(busy.metadata.get("retry-after"), ["3"]);
  });

  it("cuts a long message to MAX_DETAILS_CHARS, code first, saying how long it was, never splitting a surrogate pair", () => {
    for (const name of ["x".repeat(119_000), "😀".repeat(60_000), `${"a".repeat(480)}😀${"b".repeat(600)}`]) {
      const message = `no model named '${name}'; served models: tree`;
      const { details } = errorStatus(new ModelportError("MP_ERR_MODEL_NOT_FOUND", message));
      assert.ok(details.length <= MAX_DETAILS_CHARS, `${details.length} characters`);
      assert.ok(details.startsWith("MP_ERR_MODEL_NOT_FOUND: no model named '"), details.slice(0, 60));
      assert.ok(
        details.endsWith(`… (${"MP_ERR_MODEL_NOT_FOUND: ".length + message.length} characters)`),
        details.slice(-60),
      );
      assert.equal(Buffer.from(details, "utf8").toString("utf8"), details, "well-formed UTF-16");
    }
    const short = errorStatus(new ModelportError("MP_ERR_MODEL_NOT_FOUND", "no model named 'nope'"));
    assert.equal(short.details, "MP_ERR_MODEL_NOT_FOUND: no model named 'nope'");
  });
});
