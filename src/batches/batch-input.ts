// A batch input file: JSON Lines, one request a line, `{custom_id, method: "POST", url, body}`, as
// OpenAI's Batch API takes them. Checked whole at upload (a bad file is refused before it is
// stored) and read again when a batch runs it.
import { ModelportError } from "../errors.js";
import { LANGUAGE_ENDPOINTS, type LanguageEndpoint } from "../jobs/language-work.js";
import { TimeSlice } from "./time-slice.js";

/** The endpoints a batch may target: those a language-model job may stand for. */
export const BATCH_ENDPOINTS = LANGUAGE_ENDPOINTS;

/** Longest custom_id, as OpenAI bounds it. */
const MAX_CUSTOM_ID_CHARS = 512;

export interface BatchLine {
  /** Its line in the file (1-based; blank lines count). */
  line: number;
  customId: string;
  url: LanguageEndpoint;
  body: Record<string, unknown>;
}

export const isBatchEndpoint = (url: unknown): url is LanguageEndpoint =>
  typeof url === "string" && (BATCH_ENDPOINTS as readonly string[]).includes(url);

function invalid(line: number, message: string, param?: string): ModelportError {
  return new ModelportError("MP_ERR_FILE_INVALID", `line ${line}: ${message}`, {
    line,
    ...(param ? { param } : {}),
  });
}

/**
 * The requests of a batch file, in order. Blank lines are skipped (a final newline is usual).
 * @throws ModelportError MP_ERR_FILE_INVALID naming the first bad line (1-based): not UTF-8,
 * not a JSON object of the documented shape, a repeated custom_id, more than `maxLines` requests,
 * or none at all.
 */
export async function parseBatchFile(data: Buffer, maxLines: number): Promise<BatchLine[]> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    throw new ModelportError("MP_ERR_FILE_INVALID", "the file is not UTF-8 text");
  }
  const lines: BatchLine[] = [];
  const seen = new Set<string>();
  let n = 0;
  // A large file is read in slices, so the event loop keeps serving meanwhile.
  const slice = new TimeSlice();
  for (const raw of text.split("\n")) {
    n++;
    if (n % 64 === 0) await slice.pass();
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") continue;
    if (lines.length === maxLines) {
      throw new ModelportError(
        "MP_ERR_FILE_INVALID",
        `the file holds more than ${maxLines} requests (jobs.batches.maxFileLines); split it into several batches`,
        { line: n, limit: maxLines },
      );
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw invalid(n, `not valid JSON (${(err as Error).message})`);
    }
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw invalid(n, "not a JSON object");
    const { custom_id: customId, method, url, body } = value as Record<string, unknown>;
    if (typeof customId !== "string" || customId.length === 0 || customId.length > MAX_CUSTOM_ID_CHARS)
      throw invalid(n, `"custom_id" must be a string of 1 to ${MAX_CUSTOM_ID_CHARS} characters`, "custom_id");
    if (seen.has(customId))
      throw invalid(n, `"custom_id" ${JSON.stringify(customId)} repeats an earlier line's`, "custom_id");
    seen.add(customId);
    if (method !== "POST") throw invalid(n, '"method" must be "POST"', "method");
    if (!isBatchEndpoint(url)) throw invalid(n, `"url" must be one of ${BATCH_ENDPOINTS.join(", ")}`, "url");
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw invalid(n, '"body" must be a JSON object (the request the url takes)', "body");
    lines.push({ line: n, customId, url, body: body as Record<string, unknown> });
  }
  if (lines.length === 0) throw new ModelportError("MP_ERR_FILE_INVALID", "the file holds no request");
  return lines;
}
