// The files that travel beside a model, for every kind of model: NAME.manifest.json (its
// sha256) and NAME.golden.json (the example scored before the model is ready).
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";

/** The sha256 in a manifest file, lowercased; undefined (with a problem noted) when unreadable or invalid. */
export function manifestSha256(file: string, where: string, problems: string[]): string | undefined {
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as { sha256?: unknown };
    if (typeof m.sha256 === "string" && /^[0-9a-f]{64}$/i.test(m.sha256)) return m.sha256.toLowerCase();
    problems.push(`${where}: manifest ${file} has no valid sha256`);
  } catch (err) {
    problems.push(`${where}: cannot read manifest ${file}: ${(err as Error).message}`);
  }
  return undefined;
}

/**
 * The golden file: the configured one (resolved against `baseDir`; a problem when missing and
 * `checkFiles`), else `<stem>.golden.json` when it exists, else undefined.
 */
export function goldenFile(
  given: string | undefined,
  baseDir: string,
  stem: string,
  where: string,
  problems: string[],
  checkFiles: boolean,
): string | undefined {
  if (given) {
    const golden = resolve(baseDir, given);
    if (checkFiles && !existsSync(golden)) problems.push(`${where}.golden: ${golden} does not exist`);
    return golden;
  }
  return existsSync(`${stem}.golden.json`) ? `${stem}.golden.json` : undefined;
}
