// Waits for a condition a test cannot be told about (a background swap, a poll, an idle timer),
// failing with what it waited for; the limit is generous, so a busy machine only makes it slower.
import assert from "node:assert/strict";

export async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  ms = 20_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
