// Language-model work as jobs: what such a job stores ({"openai": {endpoint, body}}), the OpenAI
// endpoints it may name, and the runner the job queue is given to validate and answer it. The
// runner is implemented by the HTTP surface (src/server/openai-work.ts), with the very code its
// routes answer with, and injected where the queue is built: src/jobs never imports src/server.
import type { CancelHandle } from "../cancel.js";
import type { Capability, ServedModel } from "../catalogue/served-model.js";
import { ModelportError } from "../errors.js";
import type { TraceParent } from "../telemetry/propagation.js";

/** The OpenAI routes a job may stand for. */
export const LANGUAGE_ENDPOINTS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/responses",
] as const;

export type LanguageEndpoint = (typeof LANGUAGE_ENDPOINTS)[number];

/** One OpenAI request held by a job: the route it stands for and its body (with `model` set). */
export interface LanguageWork {
  readonly endpoint: LanguageEndpoint;
  readonly body: Record<string, unknown>;
}

export interface LanguageWorkResult {
  /** The JSON the route would have answered the same request with. */
  readonly response: Record<string, unknown>;
  /** What the work used, counted against the job's owner as the route counts a request's. */
  readonly usage: {
    readonly promptTokens: number;
    readonly completionTokens: number;
    readonly rows: number;
    readonly computeMs: number;
  };
}

export interface LanguageWorkOptions {
  readonly cancel: CancelHandle;
  readonly trace: TraceParent | undefined;
  /** Always true for jobs: the work waits behind every interactive request for a sequence or a batch. */
  readonly background: true;
  /** Names the answer (chatcmpl-…, cmpl-…): the job's id. */
  readonly id: string;
}

export interface LanguageWorkRunner {
  /**
   * Checks the work as its route checks a request (the same parsers, the model's prompt limits),
   * so a bad body is refused at submission.
   * @throws ModelportError a 4xx naming the field at fault.
   */
  validate(model: ServedModel, work: LanguageWork): void;
  /** Answers the work, non-streamed. @throws ModelportError as the route would. */
  run(model: ServedModel, work: LanguageWork, options: LanguageWorkOptions): Promise<LanguageWorkResult>;
}

/** The capability each endpoint needs of the model. */
export function endpointCapability(endpoint: LanguageEndpoint): Capability {
  switch (endpoint) {
    case "/v1/chat/completions":
    case "/v1/responses":
      return "chat";
    case "/v1/completions":
      return "completion";
    case "/v1/embeddings":
      return "embeddings";
  }
}

/** The job input stored for `work` (JSON text). */
export function languageInput(work: LanguageWork): string {
  return JSON.stringify({ openai: { endpoint: work.endpoint, body: work.body } });
}

/** The work a stored job input holds, or undefined for a tensor job's input. */
export function readLanguageWork(input: string): LanguageWork | undefined {
  // A tensor input starts {"rows" or {"inputs": only a language job's starts with {"openai".
  if (!input.startsWith('{"openai":')) return undefined;
  const parsed = JSON.parse(input) as { openai: LanguageWork };
  return parsed.openai;
}

/**
 * The job body's `endpoint`, checked.
 * @throws ModelportError MP_ERR_REQUEST_INVALID naming `endpoint`.
 */
export function checkEndpoint(raw: unknown): LanguageEndpoint {
  if (typeof raw !== "string" || !(LANGUAGE_ENDPOINTS as readonly string[]).includes(raw)) {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `"endpoint" must be one of ${LANGUAGE_ENDPOINTS.slice(0, 3).join(", ")}`,
      { param: "endpoint" },
    );
  }
  if (raw === "/v1/responses") {
    throw new ModelportError(
      "MP_ERR_REQUEST_INVALID",
      `"endpoint" /v1/responses is not served by this server yet; use /v1/chat/completions`,
      { param: "endpoint" },
    );
  }
  return raw as LanguageEndpoint;
}

/** Jobs generating at once on a language model: llm.jobConcurrency, else one less than its sequences (at least 1). */
export function languageJobConcurrency(model: ServedModel, fallback: number): number {
  const llm = "llm" in model.config ? model.config.llm : undefined;
  if (llm?.jobConcurrency !== undefined) return llm.jobConcurrency;
  // Batched embeddings models have no sequences: their jobs queue behind requests in the batcher.
  if (model.config.backend === "transformers") return fallback;
  return Math.max(1, (llm?.sequences ?? 1) - 1);
}
