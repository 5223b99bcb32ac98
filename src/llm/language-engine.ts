// What a local language backend supplies to the one model lifecycle (src/lifecycle/): load,
// generate and close, and the figures its status shows. Checksums, the golden check, states and
// readiness are the lifecycle's (src/lifecycle/local-language-model.ts), never the backend's.
import type { GenerateOptions, GenerateRequest, GenerateResult } from "./language-model.js";

export interface LanguageEngine {
  /** Loads the weights; rejects with a ModelportError (MP_ERR_MODEL_LOAD_FAILED) when it cannot. */
  start(): Promise<{ loadMs: number }>;
  /** Idempotent; aborts running generations and waits for them to free their slots. */
  close(): Promise<void>;
  /** Whether chat works (a chat template was found); known once started. */
  readonly chat: boolean;
  /**
   * Generates under the contract of src/llm/language-model.ts; `capped` false for the golden
   * check (llm.maxTokens caps clients, not the model's own check).
   */
  generate(request: GenerateRequest, options: GenerateOptions, capped?: boolean): Promise<GenerateResult>;
  /** Requests generating and waiting, the most at once, and the context sizes once loaded. */
  details(): {
    concurrency: { active: number; waiting: number; limit: number };
    contextSize?: number;
    batchSize?: number;
  };
}
