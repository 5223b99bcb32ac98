// The lazy start of the OpenTelemetry SDK when the environment asks for tracing (settings.ts).
// Off, nothing of OpenTelemetry is loaded (sdk.ts is imported only here, dynamically). One SDK
// per process: every app built in the process shares it (docs/Tracing.md).
import { type Env, tracingSettings } from "./settings.js";
import { tracing } from "./spans.js";

interface Sdk {
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

let started: Promise<Sdk | undefined> | undefined;

/**
 * Starts the SDK when the environment asks for tracing (once per process; later calls return the
 * first call's promise). Resolves true when tracing is on.
 * @throws ModelportError MP_ERR_CONFIG_INVALID for settings it cannot honour.
 */
export async function startTracing(env: Env = process.env): Promise<boolean> {
  started ??= (async () => {
    const settings = tracingSettings(env);
    if (!settings) return undefined;
    const { loadSdk } = await import("./sdk.js");
    const sdk = loadSdk(settings);
    tracing.factory = sdk.factory;
    tracing.stageMs = settings.stageMs;
    tracing.on = true;
    return sdk;
  })();
  return (await started) !== undefined;
}

/** Exports the spans ended so far (a no-op when tracing is off). */
export async function flushTracing(): Promise<void> {
  const sdk = await started?.catch(() => undefined);
  await sdk?.flush();
}

/** Exports what is left and stops tracing in this process (on exit). */
export async function stopTracing(): Promise<void> {
  const sdk = await started?.catch(() => undefined);
  tracing.on = false;
  await sdk?.shutdown();
}
