// Backend lookup by name. Backends load their drivers lazily, so listing them here is free.
import { ModelportError } from "../errors.js";
import type { Backend, BackendName } from "./backend.js";
import { CustomBackend } from "./custom/custom-backend.js";
import { OnnxBackend } from "./onnx/onnx-backend.js";
import { TransformersBackend } from "./transformers/transformers-backend.js";

export const BACKEND_NAMES: readonly BackendName[] = ["onnx", "custom", "transformers"];

/** Returns the backend for `name`; throws MP_ERR_MODEL_LOAD_FAILED for an unknown one. */
export function getBackend(name: string): Backend {
  switch (name) {
    case "onnx":
      return new OnnxBackend();
    case "custom":
      return new CustomBackend();
    case "transformers":
      return new TransformersBackend();
    default:
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `unknown backend '${name}'; use one of ${BACKEND_NAMES.join(", ")}`,
      );
  }
}
