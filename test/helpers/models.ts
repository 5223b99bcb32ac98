// Builds the project's example and test models into a fresh temporary folder, as a user's
// `npm run models` would, so tests use the real loading code on real files.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildModels } from "../../examples/build-models.js";

let built: Promise<string> | undefined;

/** The folder holding every built model (NAME.onnx, NAME.golden.json, NAME.manifest.json); built once per test file. */
export function testModels(): Promise<string> {
  built ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelport-models-"));
    await buildModels(dir);
    return dir;
  })();
  return built;
}
