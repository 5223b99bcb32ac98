// trace_id and span_id on a request's log lines (src/telemetry/log-fields.ts): with modelport's
// logger options a bound trace shows on the lines the request logger and its children write, and
// on no other logger's; the line's own fields win. Any other pino logger gets them bound; a logger
// without setBindings, a child logger with them.
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { pino } from "pino";
import { TRACE_LOG_OPTIONS, withTrace } from "../../src/telemetry/log-fields.js";

function capture(options: object = TRACE_LOG_OPTIONS) {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: "info", ...options }, sink), lines };
}

const TRACE = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7", flags: 1 };

describe("trace ids on log lines", () => {
  it("a bound request logger and its children write them; its parent and siblings do not", () => {
    const { log, lines } = capture();
    const request = log.child({ reqId: "r-1" });
    const earlier = request.child({ part: "decode" });
    const sibling = log.child({ reqId: "r-2" });
    assert.equal(withTrace(request, TRACE), request);
    request.info("request completed");
    earlier.info({ rows: 2 }, "decoded");
    sibling.info("other request");
    log.info("server line");
    const by = (msg: string) => lines.find((l) => l.msg === msg)!;
    assert.equal(by("request completed").trace_id, TRACE.traceId);
    assert.equal(by("request completed").span_id, TRACE.spanId);
    assert.equal(by("request completed").reqId, "r-1");
    // A child made before the trace was bound sees it too (pino children inherit from their parent).
    assert.equal(by("decoded").trace_id, TRACE.traceId);
    assert.equal(by("decoded").rows, 2);
    for (const msg of ["other request", "server line"]) {
      assert.equal(by(msg).trace_id, undefined, msg);
      assert.equal(by(msg).span_id, undefined, msg);
    }
  });

  it("the line's own fields win over the trace's", () => {
    const { log, lines } = capture();
    const request = log.child({ reqId: "r-3" });
    withTrace(request, TRACE).info({ span_id: "mine" }, "explicit");
    assert.equal(lines[0]!.span_id, "mine");
    assert.equal(lines[0]!.trace_id, TRACE.traceId);
  });

  it("another pino logger gets them bound; a logger without setBindings, a child with them", () => {
    const { log, lines } = capture({});
    const request = log.child({ reqId: "r-4" });
    assert.equal(withTrace(request, TRACE), request);
    request.info("bound");
    assert.equal(lines[0]!.trace_id, TRACE.traceId);
    assert.equal(lines[0]!.span_id, TRACE.spanId);
    interface Plain {
      child(bindings: Record<string, string>): Plain;
    }
    const made: Record<string, string>[] = [];
    const child: Plain = { child: () => child };
    const plain: Plain = {
      child: (bindings) => {
        made.push(bindings);
        return child;
      },
    };
    assert.equal(withTrace(plain, TRACE), child);
    assert.deepEqual(made, [{ trace_id: TRACE.traceId, span_id: TRACE.spanId }]);
  });
});
