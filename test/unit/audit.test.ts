// The audit log's file (server.auditLog): each line is in the file, in order, when audit()
// returns, and nothing is lost when the server stops right after an action.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pino } from "pino";
import { createAudit } from "../../src/server/audit.js";

const lines = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { key: string; action: string; target: string; result: string });

describe("audit log file", () => {
  it("a line is in the file when audit() returns, and lines keep their order through close", () => {
    const file = join(mkdtempSync(join(tmpdir(), "mp-audit-")), "sub", "audit.jsonl");
    const { audit, close } = createAudit(file, pino({ enabled: false }));
    audit({ key: "ops", action: "unload", target: "iris", result: "ok" });
    assert.deepEqual(
      lines(file).map((l) => [l.key, l.action, l.target, l.result]),
      [["ops", "unload", "iris", "ok"]],
    );
    for (let i = 0; i < 500; i++) audit({ key: "ops", action: "load", target: `m${i}`, result: "ok" });
    close();
    const all = lines(file);
    assert.equal(all.length, 501);
    assert.deepEqual(
      all.slice(1).map((l) => l.target),
      Array.from({ length: 500 }, (_, i) => `m${i}`),
    );
  });
});
