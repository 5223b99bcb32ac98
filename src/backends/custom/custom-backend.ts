// The custom backend: a user's TypeScript or JavaScript module exporting `load(ctx)` and
// `predict(batch)`, optionally wrapping another backend's model with pre/post-processing.
import { dirname, isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ModelportError } from "../../errors.js";
import type { ModelSignature, TensorMap } from "../../tensor.js";
import type { Backend, LoadedModel, LoadOptions } from "../backend.js";
import { OnnxBackend } from "../onnx/onnx-backend.js";
import type { HandlerContext, HandlerModule, HandlerSignature } from "./handler.js";

/** Imports a handler module; .ts/.mts/.cts files go through tsx so users need no build step. */
async function importHandler(path: string): Promise<Partial<HandlerModule>> {
  const url = pathToFileURL(path).href;
  if (/\.[mc]?ts$/.test(path)) {
    const { tsImport } = await import("tsx/esm/api");
    return (await tsImport(url, import.meta.url)) as Partial<HandlerModule>;
  }
  return (await import(url)) as Partial<HandlerModule>;
}

function checkSignature(path: string, sig: HandlerSignature | undefined): ModelSignature {
  if (!sig || !Array.isArray(sig.inputs) || !Array.isArray(sig.outputs) || sig.inputs.length === 0) {
    throw new ModelportError(
      "MP_ERR_MODEL_LOAD_FAILED",
      `handler ${path}: load(ctx) must resolve to { inputs: [...], outputs: [...] } with at least one input`,
    );
  }
  const batchable = sig.batchable ?? true;
  return {
    inputs: sig.inputs.map((s) => ({ ...s, shape: [...s.shape] })),
    outputs: sig.outputs.map((s) => ({ ...s, shape: [...s.shape] })),
    batchable,
  };
}

/** Loads handler modules. Each model gets its own worker, so module-level state is per model. */
export class CustomBackend implements Backend {
  readonly name = "custom" as const;

  async load(options: LoadOptions): Promise<LoadedModel> {
    let mod: Partial<HandlerModule>;
    try {
      mod = await importHandler(options.path);
    } catch (err) {
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `could not import handler ${options.path}: ${(err as Error).message}`,
      );
    }
    if (typeof mod.load !== "function" || typeof mod.predict !== "function") {
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `handler ${options.path} must export functions load(ctx) and predict(batch)`,
      );
    }
    const wrapped: LoadedModel[] = [];
    const dir = dirname(options.path);
    const ctx: HandlerContext = {
      name: options.name,
      dir,
      threads: options.threads,
      options: options.options,
      async loadModel(spec) {
        if (spec.backend !== "onnx") {
          throw new ModelportError(
            "MP_ERR_MODEL_LOAD_FAILED",
            `ctx.loadModel: backend '${spec.backend}' is unknown`,
          );
        }
        const path = isAbsolute(spec.path) ? spec.path : resolve(dir, spec.path);
        const inner = await new OnnxBackend().load({
          name: `${options.name}/inner`,
          path,
          threads: spec.threads ?? options.threads,
          options: {},
        });
        wrapped.push(inner);
        return inner;
      },
      badInput(message) {
        return new ModelportError("MP_ERR_HANDLER_BAD_INPUT", `${options.name}: ${message}`);
      },
      log(message, fields) {
        process.stderr.write(
          `${JSON.stringify({ level: 30, model: options.name, msg: message, ...fields })}\n`,
        );
      },
    };
    let signature: ModelSignature;
    try {
      signature = checkSignature(options.path, await mod.load(ctx));
    } catch (err) {
      if (err instanceof ModelportError) throw err;
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `handler ${options.path} failed in load(ctx): ${(err as Error).message}`,
      );
    }
    const predict = mod.predict;
    let closed = false;
    return {
      signature,
      async predict(batch: TensorMap): Promise<TensorMap> {
        try {
          return await predict(batch);
        } catch (err) {
          if (err instanceof ModelportError) throw err;
          throw new ModelportError(
            "MP_ERR_HANDLER_FAILED",
            `handler ${options.name}: ${(err as Error).message}`,
          );
        }
      },
      async close() {
        if (closed) return;
        closed = true;
        await mod.close?.();
        for (const inner of wrapped) await inner.close();
      },
    };
  }
}
