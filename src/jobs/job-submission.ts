// What a submitted job becomes before it is stored: its model and version resolved, its input
// validated like predict (or like the OpenAI route a language-model job stands for), its size and
// callback URL checked, and its request hash (what an idempotency key protects) computed. Shared
// by JobQueue.submit and JobQueue.submitMany, which add the queue limits and the store write.
import { createHash, randomUUID } from "node:crypto";
import type { Catalogue } from "../catalogue/catalogue.js";
import type { Capability, ServedModel } from "../catalogue/served-model.js";
import type { JobsConfig } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import { checkCallbackUrl } from "../notify/webhook.js";
import { decodeNative } from "../protocol/native-body.js";
import { type TraceParent, traceHeaders } from "../telemetry/propagation.js";
import type { NewJob } from "./job.js";
import { checkJobSizes } from "./job-sizes.js";
import {
  endpointCapability,
  type LanguageWork,
  type LanguageWorkRunner,
  languageInput,
} from "./language-work.js";

export interface SubmitJob {
  /** The model's name, or `name@version`. */
  model: string;
  /** The version to run (from the route's path or query); else the one after `@`, else the current one. */
  version?: string;
  /** The predict body ({rows} or {inputs}); job fields are taken out before it is stored. */
  body: Record<string, unknown>;
  /** A language model's work (an OpenAI request): stored instead of `body`. */
  work?: LanguageWork;
  idempotencyKey?: string;
  callbackUrl?: string;
  metadata?: Record<string, unknown>;
  priority?: number;
  /** The submitting key's name: its jobs are its own, and its idempotency keys too. */
  owner?: string;
  /** The owner's limit on jobs queued or running at once (its key's queuedJobs). */
  maxActive?: number;
  /** The submitting request's place in a trace, kept with the job: its attempts link to it. */
  trace?: TraceParent;
}

export interface SubmissionDeps {
  catalogue: Catalogue;
  config: JobsConfig;
  languageWork?: LanguageWorkRunner;
}

/**
 * The keys of a job body that are the model's input (what predict reads); they alone are stored.
 * Anything else (callback_url, metadata, priority, keys predict ignores) is not part of the input.
 */
const INPUT_FIELDS = ["rows", "inputs"];

/**
 * The job `req` asks for, ready to store (a fresh id). A model that loads on demand starts loading.
 * @throws ModelportError for bad input, a refused callback URL, or a version the model lacks.
 */
export async function prepareJob(req: SubmitJob, deps: SubmissionDeps): Promise<NewJob> {
  const { catalogue, config } = deps;
  // Stored as name and version apart: workers claim by name, and run the version the job names.
  const { name: model, version } = catalogue.reference(req.model, req.version);
  const capability: Capability = req.work ? endpointCapability(req.work.endpoint) : "predict";
  const host = catalogue.find(model, capability);
  // A model that loads on demand starts loading now, so its workers can claim the job.
  if (!host.ready) void (async () => catalogue.acquire(model, capability, version))().catch(() => {});
  const target = version === undefined ? host : pinnedAtSubmit(catalogue, host, version, capability);
  let input: string;
  if (req.work) {
    const runner = deps.languageWork;
    if (!runner)
      throw new ModelportError("MP_ERR_REQUEST_INVALID", "this server does not run language-model jobs");
    // A loaded model is checked for the capability now (chat needs a template); the body always.
    if (target.ready) catalogue.require(model, capability, version);
    runner.validate(target, req.work);
    input = languageInput(req.work);
    checkJobSizes(input, req, config);
  } else {
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(req.body)) if (INPUT_FIELDS.includes(k)) body[k] = v;
    input = JSON.stringify(body);
    checkJobSizes(input, req, config);
    // Validate now so bad input is a 400 at once, not a failed job later.
    if (target.signature) decodeNative(body, target.signature, target.config.limits);
  }
  if (req.callbackUrl !== undefined) {
    await checkCallbackUrl(req.callbackUrl, config.webhooks.allowPrivate, {
      lookupTimeoutMs: config.webhooks.dnsTimeoutMs,
    });
  }
  // The same Idempotency-Key for another version is another request (a conflict).
  const requestHash = createHash("sha256")
    .update(
      `${version === undefined ? model : `${model}@${version}`}\n${input}\n${req.callbackUrl ?? ""}\n${JSON.stringify(req.metadata ?? null)}`,
    )
    .digest("hex");
  return {
    id: randomUUID(),
    model,
    ...(version !== undefined ? { version } : {}),
    input,
    priority: req.priority ?? 0,
    maxAttempts: config.maxAttempts,
    timeoutMs: config.timeoutMs,
    ...(req.metadata ? { metadata: req.metadata } : {}),
    ...(req.callbackUrl ? { callbackUrl: req.callbackUrl } : {}),
    ...(req.owner !== undefined ? { owner: req.owner } : {}),
    ...(req.trace ? { trace: traceHeaders(req.trace) } : {}),
    // Per key: two keys using the same Idempotency-Key make two jobs (key names hold no '/').
    ...(req.idempotencyKey
      ? {
          idempotencyKey: req.owner !== undefined ? `${req.owner}/${req.idempotencyKey}` : req.idempotencyKey,
          requestHash,
          idempotencyTtlMs: config.idempotencyTtlMs,
        }
      : {}),
  };
}

/**
 * The version a job is pinned to, as a synchronous predict at that version would find it: one
 * the model does not have is refused now (MP_ERR_MODEL_VERSION_NOT_FOUND, 404), not left
 * queued. A model that loads on demand, pinned to the version it loads, is taken as it is
 * (its input is checked when it runs, as for an unpinned job).
 */
function pinnedAtSubmit(
  catalogue: Catalogue,
  host: ServedModel,
  version: string,
  capability: Capability,
): ServedModel {
  if (!host.ready && host.status().loadable && version === host.config.version) return host;
  const pinned = catalogue.find(host.name, capability, version);
  // API tier: a copy pinned to a version no runner holds is not ready, and says so with that code.
  if (!pinned.ready) {
    const why = pinned.notReadyError();
    if (why.code === "MP_ERR_MODEL_VERSION_NOT_FOUND") throw why;
  }
  return pinned;
}
