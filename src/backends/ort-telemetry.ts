// onnxruntime's own telemetry, off unless the operator turns it on. Its official builds from 1.29
// on record usage events on Linux too (Microsoft's 1DS SDK, in the libonnxruntime that
// onnxruntime-node ships, which @huggingface/transformers uses as well): a database under
// ~/.cache/Microsoft/DeveloperTools/.onnxruntime/, a mat-debug-<pid>.log per process in TMPDIR, and
// uploads to mobile.events.data.microsoft.com. A model server sends nothing anywhere its operator
// did not configure, so modelport sets ORT_DISABLE_TELEMETRY=1 when it is unset or empty;
// ORT_DISABLE_TELEMETRY=0 in the environment keeps onnxruntime's default (on, except where a CI
// variable such as CI or GITHUB_ACTIONS is set: there onnxruntime starts none).
//
// onnxruntime reads the variable with getenv() as it initializes, once per process. Assigning
// process.env sets the process's environment only on a main thread (a worker thread's process.env
// is a copy of its own), so this runs where onnxruntime is loaded on a main thread and before a
// model's worker thread starts.

const VARIABLE = "ORT_DISABLE_TELEMETRY";

/** Turns onnxruntime's telemetry off for this process unless ORT_DISABLE_TELEMETRY says otherwise. */
export function ortTelemetryOffByDefault(): void {
  if (!process.env[VARIABLE]) process.env[VARIABLE] = "1";
}
