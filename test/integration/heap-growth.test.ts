// `modelport serve` sets V8's heap growing factor before anything loads (src/heap-growth.ts) and
// refuses a MODELPORT_HEAP_GROWING_PERCENT it cannot use, as it refuses a bad config: exit 2 and
// the reason, before it listens. What the setting buys is measured by the overhead suite
// (docs/PERFORMANCE.md): collections are counted there, not here, since V8 paces them by the
// speed it measures.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import { REPO_ROOT, startChild } from "../helpers/server.js";

describe("MODELPORT_HEAP_GROWING_PERCENT", () => {
  for (const bad of ["lots", "-1", "10001", "1.5"]) {
    it(`refuses ${JSON.stringify(bad)} at start`, async () => {
      const err = await startChild([join(REPO_ROOT, "examples/models/segment-mlp.onnx")], {
        MODELPORT_HEAP_GROWING_PERCENT: bad,
      }).catch((e: Error) => e);
      assert.ok(err instanceof Error, "the server must not start");
      assert.match(err.message, /exited with 2/);
      assert.ok(
        err.message.includes(
          `MODELPORT_HEAP_GROWING_PERCENT must be a whole number from 0 to 10000, got ${JSON.stringify(bad)}`,
        ),
        err.message,
      );
    });
  }
});
