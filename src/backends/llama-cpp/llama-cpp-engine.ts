// The llama-cpp backend: a GGUF model served through node-llama-cpp (the only module that
// imports it, lazily, so a server without GGUF models never loads llama.cpp). It supplies load,
// generate and close to the one model lifecycle (src/lifecycle/local-language-model.ts), which
// owns the checksum, the golden check and readiness. One context with
// `llm.sequences` parallel sequences; each request holds one sequence while it generates, and
// waits in a bounded line (SlotQueue) when all are busy. Threads are always set from the
// model's config: llama.cpp's default (all cores, at least 4) collapses throughput on small
// machines (docs/Performance-tuning.md#the-thread-budget).
import type {
  ChatHistoryItem,
  JinjaTemplateChatWrapper,
  Llama,
  LlamaCompletion,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
  LlamaText,
  Token,
} from "node-llama-cpp";
import type { Logger } from "pino";
import type { LanguageModelConfig } from "../../config/schema.js";
import { ModelportError } from "../../errors.js";
import type { LanguageEngine } from "../../llm/language-engine.js";
import type {
  ChatMessage,
  FinishReason,
  GenerateOptions,
  GenerateRequest,
  GenerateResult,
} from "../../llm/language-model.js";
import { SlotQueue } from "../../llm/slot-queue.js";
import { StopScanner } from "../../llm/stop-scanner.js";
import {
  answerProblem,
  partialResponse,
  planStructured,
  readToolAnswer,
  type StructuredPlan,
} from "../../llm/structured-output.js";
import type { TraceParent } from "../../telemetry/propagation.js";
import { ATTR, endSpan, SPAN, type Span, startSpan, tracing } from "../../telemetry/spans.js";
import { llamaMetadataProblems, readGgufHeader } from "./gguf-file.js";
import { Grammars, writableCharacters } from "./grammars.js";
import { scoreTokens, withinText } from "./logprobs.js";

type NodeLlamaCpp = typeof import("node-llama-cpp");

let driver: Promise<{ mod: NodeLlamaCpp; llama: Llama }> | undefined;

/** Characters tokenized at a time by the early context check (refuseFarOverContext). */
const PRECHECK_SLICE = 4096;

/** Generations a structured answer may take (the first and its retries), all within max_tokens. */
const STRUCTURED_ATTEMPTS = 3;

/**
 * A -100 logit_bias under a grammar: as unlikely as a token can be, yet still there when the
 * grammar allows nothing else (a banned token at -Infinity there leaves llama.cpp no token to
 * pick, and the generation fails).
 */
const NEVER_UNDER_GRAMMAR = -1e9;

/**
 * node-llama-cpp and one Llama instance per process, loaded on first use. CPU only, never
 * building from source; maxThreads 0 makes each context's `threads` the exact count it uses.
 */
function loadDriver(log: Logger): Promise<{ mod: NodeLlamaCpp; llama: Llama }> {
  driver ??= (async () => {
    const mod = await import("node-llama-cpp");
    const llama = await mod.getLlama({
      gpu: false,
      build: "never",
      maxThreads: 0,
      logLevel: mod.LlamaLogLevel.warn,
      logger: (level, message) => {
        const text = message.trim();
        if (text) log.warn({ llamaCpp: level }, text);
      },
    });
    return { mod, llama };
  })();
  driver.catch(() => {
    driver = undefined;
  });
  return driver;
}

/** One parallel sequence and the completion object bound to it. */
interface Slot {
  sequence: LlamaContextSequence;
  completion: LlamaCompletion;
}

export interface LlamaCppDeps {
  log: Logger;
}

export class LlamaCppEngine implements LanguageEngine {
  readonly name: string;
  private model: LlamaModel | undefined;
  private context: LlamaContext | undefined;
  private chatWrapper: JinjaTemplateChatWrapper | undefined;
  private grammars: Grammars | undefined;
  /** The ASCII characters one token writes alone (grammars.ts), computed on the first structured request. */
  private writable: Set<string> | undefined;
  /** Grammars already reported as unusable on this model, so the log says it once. */
  private readonly unusableLogged = new Set<string>();
  /** Token ids run 0 … vocabSize − 1 (from the GGUF header). */
  private vocabSize = 0;
  private TokenBias: NodeLlamaCpp["TokenBias"] | undefined;
  private slots: SlotQueue<Slot> | undefined;
  /** Generations in flight and the controller that stops each. */
  private readonly running = new Map<Promise<unknown>, AbortController>();
  private closed: Promise<void> | undefined;
  private readonly log: Logger;

  constructor(
    readonly config: LanguageModelConfig,
    deps: LlamaCppDeps,
  ) {
    this.name = config.name;
    this.log = deps.log.child({ model: config.name });
  }

  get chat(): boolean {
    return this.chatWrapper !== undefined;
  }

  details(): ReturnType<LanguageEngine["details"]> {
    return {
      concurrency: {
        active: this.slots?.active ?? 0,
        waiting: this.slots?.waiting ?? 0,
        limit: this.config.llm.sequences,
      },
      ...(this.context ? { contextSize: this.context.contextSize, batchSize: this.context.batchSize } : {}),
    };
  }

  async start(): Promise<{ loadMs: number }> {
    const started = performance.now();
    if (this.closed)
      throw new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.name}' is closed`);
    try {
      await this.load();
    } catch (err) {
      if (err instanceof ModelportError) throw err;
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `cannot load ${this.config.path}: ${(err as Error).message}`,
      );
    }
    const loadMs = performance.now() - started;
    this.log.info(
      { loadMs: Math.round(loadMs), threads: this.config.threads, sequences: this.config.llm.sequences },
      "language model loaded",
    );
    return { loadMs };
  }

  private async load(): Promise<void> {
    const c = this.config;
    // Checked here, not by llama.cpp: some missing keys abort the process instead of throwing.
    const header = await readGgufHeader(c.path).catch((err: Error) => {
      throw new ModelportError("MP_ERR_MODEL_LOAD_FAILED", `${c.path}: ${err.message}`);
    });
    const problems = llamaMetadataProblems(header);
    const vocab = header.metadata.get("tokenizer.ggml.tokens");
    this.vocabSize = Array.isArray(vocab) ? vocab.length : 0;
    if (problems.length > 0) {
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `${c.path} cannot be served by llama.cpp: ${problems.join("; ")}`,
      );
    }
    const { mod, llama } = await loadDriver(this.log);
    this.grammars = new Grammars(llama);
    this.TokenBias = mod.TokenBias;
    this.model = await llama.loadModel({ modelPath: c.path, gpuLayers: 0 });
    this.context = await this.model.createContext({
      contextSize: Math.min(c.llm.contextSize, this.model.trainContextSize),
      sequences: c.llm.sequences,
      threads: c.threads,
      ...(c.llm.batchSize ? { batchSize: c.llm.batchSize } : {}),
    });
    const slots: Slot[] = [];
    for (let i = 0; i < c.llm.sequences; i++) {
      const sequence = this.context.getSequence();
      slots.push({ sequence, completion: new mod.LlamaCompletion({ contextSequence: sequence }) });
    }
    this.slots = new SlotQueue(slots, {
      name: c.name,
      maxWaiting: c.llm.maxWaiting,
      maxWaitMs: c.limits.timeoutMs,
    });
    const template = c.llm.chatTemplate ?? ggufChatTemplate(this.model);
    if (template) {
      this.chatWrapper = new mod.JinjaTemplateChatWrapper({ template, tokenizer: this.model.tokenizer });
    }
  }

  /** Generates; rejects with MP_ERR_SERVER_SHUTTING_DOWN once closed. */
  generate(request: GenerateRequest, options: GenerateOptions = {}, capped = true): Promise<GenerateResult> {
    if (this.closed || !this.slots)
      return Promise.reject(
        new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.name}' is closed`),
      );
    return this.run(request, options, capped);
  }

  /**
   * Waits for a sequence, generates, frees the sequence; used by requests and the golden check
   * (`capped` false: llm.maxTokens does not apply).
   */
  private async run(
    request: GenerateRequest,
    options: GenerateOptions,
    capped = true,
  ): Promise<GenerateResult> {
    this.refuseFarOverContext(request);
    const plan = planStructured(request);
    const messages = plan.messages ?? request.messages;
    const input = messages ? this.renderChat(messages) : undefined;
    // Only a structured answer waits for its grammar: a plain request queues for a slot at once.
    const grammar = plan.grammar ? await this.grammarFor(plan) : undefined;
    const bias = request.logitBias ? this.tokenBias(request.logitBias, grammar !== undefined) : undefined;
    const prompt = this.promptOf(request, input);
    // The golden check always starts from an empty sequence, so it evaluates the same way each time.
    const cache = capped && this.config.llm.prefixCache;
    const slot = await this.slots!.acquire(
      options.cancel,
      cache ? (s) => s.sequence.compareContextTokens(prompt.full).firstDifferentIndex : undefined,
      options.background === true,
    );
    // One controller per generation, aborted by the client's cancel or by close().
    const ac = new AbortController();
    const detach = options.cancel?.onCancel(() => ac.abort());
    const work = this.generateOn(slot, request, prompt, cache, input, ac.signal, options.onDelta, capped, {
      plan,
      ...(grammar ? { grammar } : {}),
      ...(bias ? { bias } : {}),
      trace: options.trace,
    });
    this.running.set(work, ac);
    try {
      return await work;
    } finally {
      detach?.();
      this.running.delete(work);
      this.slots!.release(slot);
    }
  }

  /**
   * The grammar a plan's answer is generated under; none for free text, and none when this
   * model's vocabulary cannot write alone a character the grammar needs, or has no end token
   * (the grammar could then reach a point no token continues): the answer is then generated
   * freely and only validated.
   */
  private async grammarFor(plan: StructuredPlan): Promise<LlamaGrammar | undefined> {
    if (!plan.grammar || !this.grammars || !this.model) return undefined;
    this.writable ??= writableCharacters(this.model);
    const unmet = plan.grammar.needs.unmet(this.writable);
    const tokens = this.model.tokens;
    if (tokens.eos === null && tokens.eot === null) unmet.push("an end-of-generation token");
    if (unmet.length > 0) {
      const reason = unmet.join(" ");
      if (!this.unusableLogged.has(reason)) {
        this.unusableLogged.add(reason);
        this.log.warn(
          { unmet },
          "structured answers on this model are validated but not generated under a grammar: its vocabulary has no token of its own for what the grammar needs",
        );
      }
      return undefined;
    }
    return this.grammars.for(plan.grammar.gbnf, plan.tools ? "tools" : "response_format");
  }

  /**
   * The prompt's tokens (without BOS: LlamaCompletion puts it in front itself, and a template that
   * renders it would double it) and as the sequence will hold them (with BOS).
   * @throws ModelportError MP_ERR_LLM_CONTEXT_OVERFLOW when no room is left for an answer.
   */
  private promptOf(
    request: GenerateRequest,
    chat: { text: LlamaText } | undefined,
  ): { tokens: Token[]; full: Token[] } {
    const model = this.model!;
    let tokens: Token[] = chat
      ? chat.text.tokenize(model.tokenizer, "trimLeadingSpace")
      : request.promptTokens
        ? this.checkedTokens(request.promptTokens)
        : model.tokenize(request.prompt ?? "", false, "trimLeadingSpace");
    const bos = model.tokens.bos;
    if (tokens[0] !== undefined && tokens[0] === bos) tokens = tokens.slice(1);
    const full = bos !== null ? [bos, ...tokens] : tokens;
    const contextSize = this.context!.contextSize;
    if (contextSize - full.length < 1) {
      throw new ModelportError(
        "MP_ERR_LLM_CONTEXT_OVERFLOW",
        `the prompt takes ${full.length} tokens; model '${this.name}' has a context of ${contextSize} per request (llm.contextSize), leaving no room for an answer`,
        { promptTokens: full.length, contextSize },
      );
    }
    return { tokens, full };
  }

  private async generateOn(
    slot: Slot,
    request: GenerateRequest,
    prompt: { tokens: Token[]; full: Token[] },
    cache: boolean,
    chat: { text: LlamaText; stops: LlamaText[] } | undefined,
    signal: AbortSignal,
    onDelta: ((text: string) => void) | undefined,
    capped: boolean,
    structured: {
      plan: StructuredPlan;
      grammar?: LlamaGrammar;
      bias?: InstanceType<NodeLlamaCpp["TokenBias"]>;
      /** The request's place in a trace: prompt evaluation and generation are spans under it. */
      trace?: TraceParent | undefined;
    },
  ): Promise<GenerateResult> {
    const model = this.model!;
    const { sequence, completion } = slot;
    const { tokens, full } = prompt;
    // With the prefix cache, LlamaCompletion keeps what the sequence holds up to the first token
    // that differs and evaluates the rest (at least the prompt's last token); else a fresh start.
    let cachedTokens = 0;
    if (cache)
      cachedTokens = Math.min(sequence.compareContextTokens(full).firstDifferentIndex, full.length - 1);
    else await sequence.clearHistory();
    const promptTokens = full.length;
    const room = sequence.contextSize - promptTokens;
    const cap = capped ? this.config.llm.maxTokens : undefined;
    const maxTokens = Math.min(room, request.maxTokens ?? room, cap ?? room);
    const outputBefore = sequence.tokenMeter.usedOutputTokens;
    const used = () => sequence.tokenMeter.usedOutputTokens - outputBefore;
    const { plan, grammar } = structured;
    // A structured answer (a JSON schema or object, or the tool envelope) leaves only once it
    // parses and validates against the whole schema; the client's stop strings do not cut it.
    const checked = plan.schema !== undefined;
    // Its text streams as it is generated when the grammar holds the whole schema (it can then
    // only fail by being cut short); otherwise it is held until it validates, so a failed
    // attempt can be retried unseen.
    const live = !checked || (grammar !== undefined && plan.grammar?.exact === true);
    // Under a tool plan the text is the JSON envelope: an answer in words ({"response": "…) is
    // streamed as its string is decoded; calls are read once whole.
    let streamed = "";
    const send = (text: string) => {
      if (!onDelta || !text) return;
      onDelta(text);
      streamed += text;
    };
    // node-llama-cpp detokenizes the first generated token alone, and SentencePiece drops its
    // leading space there; a completion continues its prompt, so that space belongs to the text.
    let leadChecked = false;
    // Tracing on: modelport.llm.prompt until the first token comes, modelport.llm.generate from there.
    const traced = tracing.on && structured.trace !== undefined;
    const spanAttributes = { [ATTR.model]: this.name, [ATTR.promptTokens]: promptTokens };
    let promptSpan = traced
      ? startSpan(SPAN.llmPrompt, structured.trace, {
          ...spanAttributes,
          "modelport.llm.cached_tokens": cachedTokens,
        })
      : undefined;
    let generateSpan: Span | undefined;
    const endSpans = (err?: unknown) => {
      if (promptSpan) endSpan(promptSpan, err);
      if (generateSpan) {
        generateSpan.setAttribute(ATTR.completionTokens, used());
        endSpan(generateSpan, err);
      }
      promptSpan = generateSpan = undefined;
    };
    const { frequencyPenalty, presencePenalty } = request;
    const greedy = !request.temperature;

    /** One generation of at most `budget` tokens; `retry` > 0 samples anew (see below). */
    const attempt = async (budget: number, retry: number) => {
      // The client's stop strings are matched on the text by StopScanner (node-llama-cpp's own
      // triggers miss stops that cross a space between pieces); the template's end-of-turn
      // triggers (special tokens) stay with node-llama-cpp. `halt` ends the generation early,
      // keeping what was generated: on a stop string, or when the client or close() aborts.
      const scanner = new StopScanner(checked ? [] : (request.stop ?? []));
      const halt = new AbortController();
      const onAbort = () => halt.abort();
      signal.addEventListener("abort", onAbort, { once: true });
      let first: Token | undefined;
      const generated: Token[] = [];
      const emit =
        !onDelta || !live
          ? undefined
          : !plan.tools
            ? send
            : () => {
                const words = partialResponse(scanner.text);
                if (words !== undefined && words.length > streamed.length) send(words.slice(streamed.length));
              };
      const onToken = (tokens: Token[]) => {
        first ??= tokens[0];
        if (promptSpan !== undefined) {
          promptSpan.end();
          promptSpan = undefined;
          generateSpan = startSpan(SPAN.llmGenerate, structured.trace, { ...spanAttributes });
        }
        generated.push(...tokens);
      };
      const onTextChunk = (raw: string) => {
        let chunk = raw;
        if (!leadChecked && !chat && first !== undefined) {
          leadChecked = true;
          const lost =
            !chunk.startsWith(" ") &&
            model.detokenize([first], false, tokens.slice(-4)).startsWith(" ") &&
            !model.detokenize([first]).startsWith(" ");
          if (lost) chunk = ` ${chunk}`;
        }
        const text = scanner.push(chunk);
        if (text && emit) emit(text);
        if (scanner.stopped) halt.abort();
      };
      // A retry of a greedy request samples (temperature 1, the attempt's number as its seed),
      // so the same request still gets the same answer.
      const temperature = retry > 0 ? request.temperature || 1 : request.temperature;
      const seed =
        retry > 0 && (greedy || request.seed !== undefined) ? (request.seed ?? 0) + retry : request.seed;
      const sampled = !!temperature;
      try {
        const res = await completion.generateCompletionWithMeta(tokens, {
          maxTokens: budget,
          ...(sampled ? { temperature } : {}),
          ...(sampled && request.topP !== undefined ? { topP: request.topP } : {}),
          ...(sampled && seed !== undefined ? { seed } : {}),
          // OpenAI's frequency and presence penalties default to 0; node-llama-cpp's penalty is on by default.
          repeatPenalty:
            frequencyPenalty || presencePenalty
              ? { penalty: 1, frequencyPenalty: frequencyPenalty ?? 0, presencePenalty: presencePenalty ?? 0 }
              : false,
          disableContextShift: true,
          signal: halt.signal,
          stopOnAbortSignal: true,
          ...(chat?.stops.length ? { customStopTriggers: chat.stops } : {}),
          ...(grammar ? { grammar } : {}),
          ...(structured.bias ? { tokenBias: structured.bias } : {}),
          onToken,
          onTextChunk,
        });
        if (signal.aborted) throw signal.reason;
        const tail = scanner.flush();
        if (tail && emit) emit(tail);
        const cut = !scanner.stopped && res.metadata.stopReason === "maxTokens";
        return { text: scanner.text, cut, generated };
      } finally {
        signal.removeEventListener("abort", onAbort);
      }
    };

    try {
      let run = await attempt(maxTokens, 0);
      let problem = answerProblem(plan, run.text);
      // An invalid structured answer is generated again while attempts and tokens are left and
      // none of it was sent; then it ends as "length" when cut short, or as an error.
      for (let retry = 1; problem && !run.cut && streamed === "" && retry < STRUCTURED_ATTEMPTS; retry++) {
        const left = maxTokens - used();
        if (left <= 0) break;
        this.log.info(
          { problem, attempt: retry + 1 },
          "structured answer did not validate; generating it again",
        );
        run = await attempt(left, retry);
        problem = answerProblem(plan, run.text);
      }
      endSpans();
      const usage = {
        promptTokens,
        completionTokens: used(),
        ...(cache ? { cachedTokens } : {}),
      };
      const finishReason: FinishReason = run.cut ? "length" : "stop";
      if (problem && !run.cut) {
        throw new ModelportError(
          "MP_ERR_LLM_OUTPUT_INVALID",
          `model '${this.name}' did not write an answer that satisfies the ${plan.tools ? "tool calls' schemas" : "response format's schema"} within max_tokens (${used()} tokens, at most ${STRUCTURED_ATTEMPTS} attempts): ${problem}`,
          { param: plan.tools ? "tools" : "response_format", completionTokens: used() },
        );
      }
      if (plan.tools && !problem) {
        const answer = readToolAnswer(run.text, request.responseFormat?.type === "json_schema");
        if (answer.toolCalls)
          return { text: "", toolCalls: answer.toolCalls, finishReason: "tool_calls", usage };
        // The rest of the answer's words (all of them when it was not a string).
        send(answer.text.startsWith(streamed) ? answer.text.slice(streamed.length) : answer.text);
        return { text: answer.text, finishReason, usage };
      }
      if (plan.tools) {
        // Cut short under a tool plan: an answer's text so far, else the raw text as far as it got.
        const text = partialResponse(run.text) ?? run.text;
        send(text.startsWith(streamed) ? text.slice(streamed.length) : text);
        return { text, finishReason, usage };
      }
      // A held answer goes out whole now.
      if (!live) send(run.text.slice(streamed.length));
      if (request.logprobs) {
        const scored = await scoreTokens(model, sequence, full, run.generated, request.logprobs.top);
        return { text: run.text, finishReason, usage, logprobs: withinText(scored, run.text.length) };
      }
      return { text: run.text, finishReason, usage };
    } catch (err) {
      endSpans(err);
      if (err instanceof ModelportError && err.code === "MP_ERR_LLM_OUTPUT_INVALID") throw err;
      if (this.closed)
        throw new ModelportError("MP_ERR_SERVER_SHUTTING_DOWN", `model '${this.name}' is closing`);
      if (signal.aborted) {
        this.log.info(
          { generated: used(), maxTokens },
          "generation canceled: the client left; sequence freed",
        );
        throw new ModelportError("MP_ERR_REQUEST_CANCELED", "the client closed the connection");
      }
      throw new ModelportError("MP_ERR_INFERENCE_FAILED", `llama.cpp failed: ${(err as Error).message}`);
    }
  }

  /**
   * OpenAI's logit_bias as llama.cpp's: -100 never (under a grammar: never unless the grammar
   * allows nothing else, NEVER_UNDER_GRAMMAR), otherwise added to the logit.
   */
  private tokenBias(
    bias: Readonly<Record<number, number>>,
    underGrammar: boolean,
  ): InstanceType<NodeLlamaCpp["TokenBias"]> {
    const out = new this.TokenBias!(this.model!.tokenizer);
    for (const [key, value] of Object.entries(bias)) {
      const token = this.checkedTokens([Number(key)], "logit_bias")[0]!;
      out.set(
        token,
        value > -100 ? { logit: value } : underGrammar ? { logit: NEVER_UNDER_GRAMMAR } : "never",
      );
    }
    return out;
  }

  /** A token-array prompt, each id within the vocabulary. @throws ModelportError MP_ERR_REQUEST_INVALID */
  private checkedTokens(ids: readonly number[], param = "prompt"): Token[] {
    const bad = ids.findIndex((t) => t >= this.vocabSize);
    if (bad >= 0) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `${param}: token ${ids[bad]} is not in model '${this.name}''s vocabulary of ${this.vocabSize} tokens`,
        { param },
      );
    }
    return ids as Token[];
  }

  /**
   * Refuses a prompt clearly longer than the context before it is templated and tokenized whole:
   * the texts are tokenized in slices of about PRECHECK_SLICE characters (cut at a space) and
   * counting stops once the count passes the context with a margin. Tokenizing runs on the event
   * loop and grows faster than linearly with the text, so this keeps the work per request near
   * what a prompt of the context's size costs, however large the prompt (within the route's byte
   * bound). Slices can count a few tokens more or fewer than the whole text; the margin keeps
   * prompts that might fit for the exact check.
   * @throws ModelportError MP_ERR_LLM_CONTEXT_OVERFLOW
   */
  private refuseFarOverContext(request: GenerateRequest): void {
    const model = this.model;
    const contextSize = this.context?.contextSize;
    if (!model || !contextSize) return;
    const limit = Math.ceil(contextSize * 1.25) + 64;
    if (request.promptTokens && request.promptTokens.length > limit) {
      throw new ModelportError(
        "MP_ERR_LLM_CONTEXT_OVERFLOW",
        `the prompt is ${request.promptTokens.length} tokens; model '${this.name}' has a context of ${contextSize} per request (llm.contextSize)`,
        { contextSize },
      );
    }
    const texts = request.messages ? request.messages.map((m) => m.content) : [request.prompt ?? ""];
    let count = 0;
    for (const text of texts) {
      for (let i = 0; i < text.length; ) {
        let end = Math.min(text.length, i + PRECHECK_SLICE);
        if (end < text.length) {
          const space = text.lastIndexOf(" ", end);
          if (space > i) end = space;
        }
        count += model.tokenize(text.slice(i, end), false, "trimLeadingSpace").length;
        if (count > limit) {
          throw new ModelportError(
            "MP_ERR_LLM_CONTEXT_OVERFLOW",
            `the prompt takes more than ${limit} tokens (counting stopped there); model '${this.name}' has a context of ${contextSize} per request (llm.contextSize)`,
            { contextSize },
          );
        }
        i = end;
      }
    }
  }

  /** The chat rendered by the template, and the texts that end the assistant's turn. */
  private renderChat(messages: readonly ChatMessage[]): { text: LlamaText; stops: LlamaText[] } {
    if (!this.chatWrapper) {
      throw new ModelportError(
        "MP_ERR_LLM_CAPABILITY_UNSUPPORTED",
        `model '${this.name}' has no chat template (none in the GGUF file, no llm.chatTemplate); use /v1/completions or set llm.chatTemplate`,
      );
    }
    const chatHistory: ChatHistoryItem[] = messages.map((m) =>
      m.role === "assistant"
        ? { type: "model", response: [m.content] }
        : m.role === "system" || m.role === "developer"
          ? { type: "system", text: m.content }
          : { type: "user", text: m.content },
    );
    chatHistory.push({ type: "model", response: [] });
    try {
      const state = this.chatWrapper.generateContextState({ chatHistory });
      return { text: state.contextText, stops: state.stopGenerationTriggers };
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_REQUEST_INVALID",
        `the chat template of model '${this.name}' cannot render these messages: ${(err as Error).message}`,
      );
    }
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      this.slots?.close();
      for (const ac of this.running.values()) ac.abort();
      await Promise.allSettled([...this.running.keys()]);
      await this.context?.dispose();
      await this.model?.dispose();
      this.context = undefined;
      this.model = undefined;
    })();
    return this.closed;
  }
}

/** The Jinja chat template stored in the GGUF file, if any. */
function ggufChatTemplate(model: LlamaModel): string | undefined {
  const t = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template;
  return typeof t === "string" && t.trim() !== "" ? t : undefined;
}
