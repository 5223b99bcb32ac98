// A finished job's webhook: the job.finished event, signed (Standard Webhooks), with the job
// and its inline result or a link to it, each delivery attempt recorded on the job.
import type { Logger } from "pino";
import type { JobsConfig } from "../config/schema.js";
import { deliverWebhook } from "../notify/webhook.js";
import type { BlobStore } from "../storage/blob-store.js";
import { fromTraceHeaders } from "../telemetry/propagation.js";
import type { Job } from "./job.js";
import type { JobStore } from "./job-store.js";
import { jobView } from "./job-view.js";

export interface WebhookDeps {
  store: JobStore;
  blobs: BlobStore;
  config: JobsConfig;
  log: Logger;
  /** How long a presigned result URL lasts. */
  urlTtlSeconds: number;
  secret: string;
}

/**
 * Delivers a finished job's webhook (job.finished with the job, its inline result or a result
 * URL). `trace`: the last attempt's (the delivery is its child), else the submitter's when the
 * job ended without one.
 */
export async function notifyFinished(
  job: Job,
  deps: WebhookDeps,
  trace = fromTraceHeaders(job.trace),
): Promise<void> {
  const webhook = job.webhook!;
  const result = job.status === "succeeded" && job.result !== undefined ? JSON.parse(job.result) : undefined;
  let resultUrl: string | undefined;
  if (job.resultKey) {
    // Without a presigned URL the receiver still has links.result to fetch it from.
    resultUrl = await deps.blobs.url(job.resultKey, deps.urlTtlSeconds).catch((err) => {
      deps.log.warn(
        { err, jobId: job.id },
        "presigning the result URL failed; the webhook carries links.result",
      );
      return undefined;
    });
  }
  const body = JSON.stringify({
    event: "job.finished",
    job: {
      ...jobView(job),
      ...(result ? { result } : {}),
      ...(resultUrl ? { result_url: resultUrl } : {}),
    },
  });
  await deliverWebhook({
    url: webhook.url,
    // Stable across retries and restarts, so receivers can drop duplicates.
    deliveryId: `${job.id}:job.finished`,
    body,
    secret: deps.secret,
    timeoutMs: deps.config.webhooks.timeoutMs,
    maxAttempts: deps.config.webhooks.maxAttempts,
    allowPrivate: deps.config.webhooks.allowPrivate,
    lookupTimeoutMs: deps.config.webhooks.dnsTimeoutMs,
    ...(trace ? { trace } : {}),
    onAttempt: (state) => {
      void deps.store
        .recordWebhook(job.id, state)
        .catch((err) => deps.log.warn({ err }, "recording a webhook attempt failed"));
    },
  }).catch((err) => deps.log.warn({ err, jobId: job.id }, "webhook delivery failed"));
}
