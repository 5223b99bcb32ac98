// Every Prometheus metric modelport exports, defined in one place, on a registry per app so
// that two servers in one process (tests) never share counters.
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { FastCounter, FastHistogram } from "./fast-metrics.js";

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new FastCounter({
    name: "modelport_requests_total",
    help: "Requests answered, HTTP and gRPC (route grpc:<call>), by model (empty when none), route and status code (for gRPC, the HTTP status of the same outcome).",
    labelNames: ["model", "route", "status"] as const,
    registers: [this.registry],
  });

  readonly requestDuration = new FastHistogram({
    name: "modelport_request_duration_seconds",
    help: "Time from request received to response sent, by model (empty when none, as in modelport_requests_total) and route.",
    labelNames: ["model", "route"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly inferenceDuration = new FastHistogram({
    name: "modelport_inference_duration_seconds",
    help: "Time a model's runner took to score one batch, including the hop to its thread.",
    labelNames: ["model"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly modelLoadSeconds = new Gauge({
    name: "modelport_model_load_seconds",
    help: "How long the model took to load at start-up.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly modelReady = new Gauge({
    name: "modelport_model_ready",
    help: "1 when the model is loaded and passed its golden check, else 0.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly batchRows = new FastHistogram({
    name: "modelport_batch_rows",
    help: "Rows per batch sent to a model's runner.",
    labelNames: ["model"] as const,
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers: [this.registry],
  });

  readonly queueDepth = new Gauge({
    name: "modelport_queue_depth_rows",
    help: "Rows waiting in a model's queue.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly queueWait = new FastHistogram({
    name: "modelport_queue_wait_seconds",
    help: "Time a request waited in the queue before its batch was sent.",
    labelNames: ["model"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly rejections = new FastCounter({
    name: "modelport_rejections_total",
    help: "Requests refused or dropped before inference, by reason (overloaded, deadline, canceled).",
    labelNames: ["model", "reason"] as const,
    registers: [this.registry],
  });

  readonly jobs = new Gauge({
    name: "modelport_jobs",
    help: "Jobs in the store by status (read at scrape time).",
    labelNames: ["status"] as const,
    registers: [this.registry],
  });

  readonly jobStoreUp = new Gauge({
    name: "modelport_job_store_up",
    help: "1 when the job store answered its last check (made by GET /readyz), else 0.",
    registers: [this.registry],
  });

  readonly runnerUp = new Gauge({
    name: "modelport_runner_up",
    help: "API tier: 1 while the runner answers its health poll, else 0.",
    labelNames: ["runner"] as const,
    registers: [this.registry],
  });

  readonly runnerInFlight = new Gauge({
    name: "modelport_runner_in_flight",
    help: "API tier: requests forwarded to the runner and not yet answered.",
    labelNames: ["runner"] as const,
    registers: [this.registry],
  });

  readonly runnerForwards = new FastCounter({
    name: "modelport_runner_forwards_total",
    help: "API tier: predict requests forwarded, by runner and outcome (ok, error, unreachable, retried).",
    labelNames: ["runner", "outcome"] as const,
    registers: [this.registry],
  });

  readonly runnerQueueDepth = new Gauge({
    name: "modelport_runner_queue_depth_rows",
    help: "API tier: rows waiting in a model's batch queues on the runners in the rotation, as their last health poll reported (the sum of their modelport_queue_depth_rows).",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly runnerForwardDuration = new FastHistogram({
    name: "modelport_runner_forward_duration_seconds",
    help: "API tier: time from forwarding a request to a runner to its answer, by model.",
    labelNames: ["model"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  /** Cost per model (src/metrics/cost.ts): machine time × pricePerHour plus tokens × per-million prices. */
  readonly cost = {
    dollars: new FastCounter({
      name: "modelport_cost_dollars_total",
      help: "Estimated cost in dollars: local models' compute time × pricePerHour, plus tokens × per-million prices where set (upstream models: tokens only).",
      labelNames: ["model"] as const,
      registers: [this.registry],
    }),
    computeSeconds: new FastCounter({
      name: "modelport_cost_compute_seconds_total",
      help: "Machine time of the model's batches or generations (local; a llama.cpp generation's share of the model's busy time), or wall time of upstream calls.",
      labelNames: ["model"] as const,
      registers: [this.registry],
    }),
    requests: new FastCounter({
      name: "modelport_cost_requests_total",
      help: "Requests the cost figures cover (each piece of a request split across batches counts).",
      labelNames: ["model"] as const,
      registers: [this.registry],
    }),
    tokens: new FastCounter({
      name: "modelport_cost_tokens_total",
      help: "Tokens counted for cost, by kind (input, output).",
      labelNames: ["model", "kind"] as const,
      registers: [this.registry],
    }),
  };

  /**
   * Usage per API key (src/tenants/usage.ts), by key name (bounded by the key file) and model
   * (served models only). The same figures go, per hour, to the usage store (GET /v1/usage).
   */
  readonly keyUsage = {
    requests: new FastCounter({
      name: "modelport_key_requests_total",
      help: "Requests per API key name and model.",
      labelNames: ["key", "model"] as const,
      registers: [this.registry],
    }),
    rows: new FastCounter({
      name: "modelport_key_rows_total",
      help: "Rows (tensor models) or inputs (embeddings) per API key name and model.",
      labelNames: ["key", "model"] as const,
      registers: [this.registry],
    }),
    tokens: new FastCounter({
      name: "modelport_key_tokens_total",
      help: "Tokens per API key name and model, by kind (prompt, completion).",
      labelNames: ["key", "model", "kind"] as const,
      registers: [this.registry],
    }),
    computeSeconds: new FastCounter({
      name: "modelport_key_compute_seconds_total",
      help: "Machine time (local models' share of their batches; a generation's share of its model's busy time; an upstream's wall time) per API key name and model.",
      labelNames: ["key", "model"] as const,
      registers: [this.registry],
    }),
    dollars: new FastCounter({
      name: "modelport_key_cost_dollars_total",
      help: "Estimated dollars per API key name and model (compute × pricePerHour plus tokens × prices; jobs at batchPriceFactor).",
      labelNames: ["key", "model"] as const,
      registers: [this.registry],
    }),
  };

  readonly rateLimited = new FastCounter({
    name: "modelport_rate_limited_total",
    help: "Requests refused with 429 MP_ERR_RATE_LIMITED, by API key name and limit.",
    labelNames: ["key", "limit"] as const,
    registers: [this.registry],
  });

  // Management calls of callers without a valid key are counted, not audited: the audit log
  // names who acted, and one synchronous line per such call would let anyone grow the file.
  readonly managementRefused = new FastCounter({
    name: "modelport_management_refused_total",
    help: "Management calls refused to callers without a valid key (not in the audit log), by action and error code.",
    labelNames: ["action", "code"] as const,
    registers: [this.registry],
  });

  // Language models (src/llm/): per model, recorded by the OpenAI routes; the two gauges are
  // read from the models at scrape time (languageModelLoad).
  readonly llmTimeToFirstToken = new FastHistogram({
    name: "modelport_llm_time_to_first_token_seconds",
    help: "Time from a generation request received to its first generated text (streaming or not).",
    labelNames: ["model"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly llmGeneratedTokens = new FastCounter({
    name: "modelport_llm_generated_tokens_total",
    help: "Tokens generated; divided by modelport_llm_generation_seconds_total it gives tokens per second per request.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly llmPromptTokens = new FastCounter({
    name: "modelport_llm_prompt_tokens_total",
    help: "Prompt tokens of requests (chat template included), evaluated or read from a prefix cache.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly llmCachedPromptTokens = new FastCounter({
    name: "modelport_llm_prompt_cached_tokens_total",
    help: "Prompt tokens read from a sequence's kept state (a shared prefix) instead of evaluated; part of modelport_llm_prompt_tokens_total.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly llmPrefixCacheRequests = new FastCounter({
    name: "modelport_llm_prefix_cache_requests_total",
    help: "Requests to a model with a prefix cache: result hit (some prompt tokens reused) or miss.",
    labelNames: ["model", "result"] as const,
    registers: [this.registry],
  });

  readonly llmGenerationSeconds = new FastCounter({
    name: "modelport_llm_generation_seconds_total",
    help: "Time spent generating, from first token to last, summed over requests.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  /** Set by the app: each language model's active and waiting requests, read at scrape time. */
  languageModelLoad: () => Iterable<{ model: string; active: number; waiting: number }> = () => [];

  readonly llmActiveSequences = new Gauge({
    name: "modelport_llm_active_sequences",
    help: "Requests generating now (sequences in use).",
    labelNames: ["model"] as const,
    registers: [this.registry],
    collect: () => {
      for (const l of this.languageModelLoad()) this.llmActiveSequences.set({ model: l.model }, l.active);
    },
  });

  readonly llmWaitingRequests = new Gauge({
    name: "modelport_llm_waiting_requests",
    help: "Requests waiting for a free sequence (bounded by llm.maxWaiting).",
    labelNames: ["model"] as const,
    registers: [this.registry],
    collect: () => {
      for (const l of this.languageModelLoad()) this.llmWaitingRequests.set({ model: l.model }, l.waiting);
    },
  });

  readonly versionCalls = new FastCounter({
    name: "modelport_version_calls_total",
    help: "Calls answered by each loaded version of a model (unversioned, weighted and pinned), by outcome (ok, error); a version's series go when it unloads.",
    labelNames: ["model", "version", "outcome"] as const,
    registers: [this.registry],
  });

  readonly versionCallDuration = new FastHistogram({
    name: "modelport_version_call_duration_seconds",
    help: "Time from a call reaching a model version to its answer (queue wait and inference), by version.",
    labelNames: ["model", "version"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly shadowComparisons = new FastCounter({
    name: "modelport_shadow_comparisons_total",
    help: "Requests mirrored to a shadow version, by result: agree, disagree (an output differs by more than the tolerance), failed (the shadow or live call failed), skipped (too many shadow calls in flight).",
    labelNames: ["model", "version", "result"] as const,
    registers: [this.registry],
  });

  readonly shadowMaxAbsDiff = new Gauge({
    name: "modelport_shadow_max_abs_diff",
    help: "Largest absolute difference between a shadow version's output and the live one's, since shadowing started.",
    labelNames: ["model", "version"] as const,
    registers: [this.registry],
  });

  readonly coldStarts = new FastCounter({
    name: "modelport_cold_starts_total",
    help: "Requests that found their model unloaded (lazy, idle-unloaded or evicted) and waited for it to load.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly coldStartWait = new FastHistogram({
    name: "modelport_cold_start_seconds",
    help: "How long a request waited for its model to load.",
    labelNames: ["model"] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });

  readonly unloads = new FastCounter({
    name: "modelport_model_unloads_total",
    help: "Models unloaded by the server itself, by reason: idle (idleUnloadMs) or evicted (to make room within maxLoadedModels / maxLoadedBytes).",
    labelNames: ["model", "reason"] as const,
    registers: [this.registry],
  });

  // Payload capture (src/capture/, docs/Capture.md): the model label is set only for served
  // models whose config has `capture`, so it stays bounded by the configuration.
  readonly captureRecords = new FastCounter({
    name: "modelport_capture_records_total",
    help: "Request/response pairs captured and written to the capture destination, by model.",
    labelNames: ["model"] as const,
    registers: [this.registry],
  });

  readonly captureDropped = new FastCounter({
    name: "modelport_capture_dropped_total",
    help: "Sampled request/response pairs not written, by model and reason: queue_full (the bounded queue was full), sink_failed (the destination refused the write), serialize_failed, shutdown (not written within the drain time).",
    labelNames: ["model", "reason"] as const,
    registers: [this.registry],
  });

  readonly captureQueued = new Gauge({
    name: "modelport_capture_queue_records",
    help: "Captured pairs waiting to be written (bounded by server.capture.queueRecords).",
    registers: [this.registry],
  });

  /** Drops the series of a version that unloaded, so labels stay bounded by the versions loaded. */
  forgetVersion(model: string, version: string): void {
    for (const outcome of ["ok", "error"]) this.versionCalls.remove({ model, version, outcome });
    this.versionCallDuration.remove({ model, version });
  }

  private readonly requestChildren = new Map<
    string,
    { count: { inc(): void }; duration: { observe(v: number): void } }
  >();

  /** Counts one answered request; label children are cached, since label hashing costs on the hot path. */
  requestDone(model: string, route: string, status: number, seconds: number): void {
    const key = `${model}\u0000${route}\u0000${status}`;
    let child = this.requestChildren.get(key);
    if (!child) {
      child = {
        count: this.requests.labels({ model, route, status }),
        duration: this.requestDuration.labels({ model, route }),
      };
      this.requestChildren.set(key, child);
    }
    child.count.inc();
    child.duration.observe(seconds);
  }

  constructor(options: { processMetrics?: boolean } = {}) {
    if (options.processMetrics !== false)
      collectDefaultMetrics({ register: this.registry, prefix: "modelport_" });
  }
}
