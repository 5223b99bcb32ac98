// The size bounds of a job at submission: its stored input (jobs.maxInputBytes), its metadata
// (jobs.maxMetadataBytes) and its callback URL.
import type { JobsConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";

/** Longest callback_url accepted. */
const MAX_CALLBACK_URL_CHARS = 2048;

/** @throws MP_ERR_JOB_PAYLOAD_TOO_LARGE when the input, metadata or callback URL is over its limit. */
export function checkJobSizes(
  input: string,
  req: { metadata?: Record<string, unknown>; callbackUrl?: string },
  config: JobsConfig,
): void {
  const inputBytes = Buffer.byteLength(input);
  if (inputBytes > config.maxInputBytes) {
    throw new ModelportError(
      "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
      `the job input is ${inputBytes} bytes as JSON; at most ${config.maxInputBytes} (jobs.maxInputBytes): split it into several jobs`,
      { bytes: inputBytes, limit: config.maxInputBytes },
    );
  }
  if (req.metadata !== undefined) {
    const metadataBytes = Buffer.byteLength(JSON.stringify(req.metadata));
    if (metadataBytes > config.maxMetadataBytes) {
      throw new ModelportError(
        "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
        `"metadata" is ${metadataBytes} bytes as JSON; at most ${config.maxMetadataBytes} (jobs.maxMetadataBytes): store large data elsewhere and reference it`,
        { bytes: metadataBytes, limit: config.maxMetadataBytes },
      );
    }
  }
  if (req.callbackUrl !== undefined && req.callbackUrl.length > MAX_CALLBACK_URL_CHARS) {
    throw new ModelportError(
      "MP_ERR_JOB_PAYLOAD_TOO_LARGE",
      `"callback_url" is ${req.callbackUrl.length} characters; at most ${MAX_CALLBACK_URL_CHARS}`,
    );
  }
}
