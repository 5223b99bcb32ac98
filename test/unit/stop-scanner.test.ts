// Stop sequences over streamed text: found across pieces, never emitted in part.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StopScanner } from "../../src/llm/stop-scanner.js";

function run(stops: string[], pieces: string[]): { deltas: string[]; text: string; stopped: boolean } {
  const s = new StopScanner(stops);
  const deltas = pieces.map((p) => s.push(p));
  deltas.push(s.flush());
  return { deltas: deltas.filter((d) => d !== ""), text: s.text, stopped: s.stopped };
}

describe("StopScanner", () => {
  it("passes text straight through without stops", () => {
    assert.deepEqual(run([], ["a", " b", " c"]), {
      deltas: ["a", " b", " c"],
      text: "a b c",
      stopped: false,
    });
  });

  it("finds a stop that spans pieces and cuts the text before it", () => {
    const r = run(["uild f"], ["tre", " build", " find", " weigh"]);
    assert.equal(r.text, "tre b");
    assert.equal(r.stopped, true);
    assert.equal(r.deltas.join(""), r.text);
  });

  it("holds back a possible start of a stop, and releases it when it was not one", () => {
    const s = new StopScanner(["END"]);
    assert.equal(s.push("abc E"), "abc ");
    assert.equal(s.push("N"), "");
    assert.equal(s.push("x"), "ENx");
    assert.equal(s.flush(), "");
    assert.equal(s.text, "abc ENx");
  });

  it("uses the earliest of several stops and ignores input after it", () => {
    const s = new StopScanner(["zz", "b"]);
    assert.equal(s.push("aazz b"), "aa");
    assert.equal(s.push("more"), "");
    assert.equal(s.flush(), "");
    assert.equal(s.text, "aa");
  });

  it("emits a held tail at the end of generation", () => {
    assert.deepEqual(run(["stop"], ["go st"]), { deltas: ["go ", "st"], text: "go st", stopped: false });
  });
});
