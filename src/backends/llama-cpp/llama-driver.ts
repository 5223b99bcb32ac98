// node-llama-cpp, loaded once per process on first use (the only place that imports it at run
// time, so a server without GGUF models never loads llama.cpp), and what the engine reads from
// a loaded model's file.
import type { Llama, LlamaModel } from "node-llama-cpp";
import type { Logger } from "pino";

export type NodeLlamaCpp = typeof import("node-llama-cpp");

let driver: Promise<{ mod: NodeLlamaCpp; llama: Llama }> | undefined;

/**
 * node-llama-cpp and one Llama instance per process, loaded on first use. CPU only, never
 * building from source; maxThreads 0 makes each context's `threads` the exact count it uses.
 */
export function loadDriver(log: Logger): Promise<{ mod: NodeLlamaCpp; llama: Llama }> {
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

/** The Jinja chat template stored in the GGUF file, if any. */
export function ggufChatTemplate(model: LlamaModel): string | undefined {
  const t = (model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template;
  return typeof t === "string" && t.trim() !== "" ? t : undefined;
}
