// The runner of language-model jobs (src/jobs/language-work.ts): it validates a job's OpenAI
// body with the parsers the routes use, and answers it with the code the routes answer with
// (openai-answer.ts, openai-embeddings-answer.ts), non-streamed and behind interactive requests.
// The job's result is therefore exactly the JSON the route would have answered.
import type { Catalogue } from "../catalogue/catalogue.js";
import type { ServedModel } from "../catalogue/served-model.js";
import type { Config } from "../config/schema.js";
import { ModelportError } from "../errors.js";
import type {
  LanguageWork,
  LanguageWorkOptions,
  LanguageWorkResult,
  LanguageWorkRunner,
} from "../jobs/language-work.js";
import type { Metrics } from "../metrics/metrics.js";
import { answerId, countTokens, type GenerationKind, generateAnswer } from "./openai-answer.js";
import { embedAnswer, parseEmbeddingsRequest } from "./openai-embeddings-answer.js";
import { type OpenAiRequest, parseChatRequest, parseCompletionRequest } from "./openai-request.js";
import { promptLimits } from "./prompt-limits.js";

export interface OpenAiWorkDeps {
  readonly config: Config;
  readonly catalogue: Catalogue;
  readonly metrics: Metrics;
}

export class OpenAiWorkRunner implements LanguageWorkRunner {
  constructor(private readonly deps: OpenAiWorkDeps) {}

  validate(model: ServedModel, work: LanguageWork): void {
    this.parse(model, work);
  }

  async run(
    model: ServedModel,
    work: LanguageWork,
    options: LanguageWorkOptions,
  ): Promise<LanguageWorkResult> {
    const parsed = this.parse(model, work);
    const started = performance.now();
    if (parsed.kind === "embeddings") {
      let computeMs = 0;
      const { response, promptTokens } = await embedAnswer(model, parsed.request, {
        cancel: options.cancel,
        trace: options.trace,
        background: true,
        onCompute: (ms) => {
          computeMs += ms;
        },
      });
      return {
        response,
        usage: { rows: parsed.request.inputs.length, promptTokens, completionTokens: 0, computeMs },
      };
    }
    const { response, usage } = await generateAnswer(model, parsed.kind, parsed.request, {
      id: answerId(parsed.kind, options.id),
      created: Math.floor(Date.now() / 1000),
      cancel: options.cancel,
      trace: options.trace,
      background: true,
    });
    // Counted as the routes count a generation, less the time-to-first-token histogram, which
    // measures what interactive clients wait.
    countTokens(this.deps.metrics, model.name, usage);
    return {
      response,
      usage: {
        rows: 0,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        computeMs: performance.now() - started,
      },
    };
  }

  /** The work's body through its route's parser, against `model`'s limits. @throws ModelportError 4xx */
  private parse(
    model: ServedModel,
    work: LanguageWork,
  ):
    | { kind: GenerationKind; request: OpenAiRequest }
    | { kind: "embeddings"; request: ReturnType<typeof parseEmbeddingsRequest> } {
    if (work.body.stream === true) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        "stream: a job's answer is stored whole; send stream: false (follow the job with GET /v1/jobs/{id}/events)",
        { param: "stream" },
      );
    }
    const limitsFor = () => promptLimits(this.deps, model.name);
    switch (work.endpoint) {
      case "/v1/chat/completions":
        return { kind: "chat", request: parseChatRequest(work.body, limitsFor) };
      case "/v1/completions":
        return { kind: "completion", request: parseCompletionRequest(work.body, limitsFor) };
      case "/v1/embeddings":
        return {
          kind: "embeddings",
          request: parseEmbeddingsRequest(work.body, this.deps.config.limits.maxBatchRows),
        };
      default:
        throw new ModelportError("MP_ERR_REQUEST_INVALID", `"endpoint" ${work.endpoint} is not served`, {
          param: "endpoint",
        });
    }
  }
}
