// The onnx backend: the only module that imports onnxruntime-node. It reads input and
// output names, datatypes and shapes from the model and runs batches on the CPU with an
// explicit intra-op thread count.
import { stat } from "node:fs/promises";
import { ModelportError } from "../../errors.js";
import { fromHalfBits, toHalfBits } from "../../protocol/float16.js";
import type { Datatype, ModelSignature, Tensor, TensorMap, TensorSpec } from "../../tensor.js";
import type { Backend, LoadedModel, LoadOptions } from "../backend.js";
import { ortTelemetryOffByDefault } from "../ort-telemetry.js";

type Ort = typeof import("onnxruntime-node");
type OrtTensor = import("onnxruntime-node").Tensor;
type OrtType = OrtTensor["type"];

const ORT_TO_DATATYPE: Partial<Record<OrtType, Datatype>> = {
  bool: "BOOL",
  uint8: "UINT8",
  uint16: "UINT16",
  uint32: "UINT32",
  uint64: "UINT64",
  int8: "INT8",
  int16: "INT16",
  int32: "INT32",
  int64: "INT64",
  float16: "FP16",
  float32: "FP32",
  float64: "FP64",
  string: "BYTES",
};

const DATATYPE_TO_ORT: Record<Datatype, OrtType> = {
  BOOL: "bool",
  UINT8: "uint8",
  UINT16: "uint16",
  UINT32: "uint32",
  UINT64: "uint64",
  INT8: "int8",
  INT16: "int16",
  INT32: "int32",
  INT64: "int64",
  FP16: "float16",
  FP32: "float32",
  FP64: "float64",
  BYTES: "string",
};

let ortPromise: Promise<Ort> | undefined;
/** onnxruntime-node loads lazily: a process that serves no ONNX model never pays for it. */
function loadOrt(): Promise<Ort> {
  ortTelemetryOffByDefault();
  ortPromise ??= import("onnxruntime-node");
  return ortPromise;
}

function toSpec(meta: import("onnxruntime-node").InferenceSession.ValueMetadata): TensorSpec {
  if (!meta.isTensor) {
    throw new ModelportError(
      "MP_ERR_MODEL_LOAD_FAILED",
      `input or output '${meta.name}' is not a tensor (a sequence or map); modelport serves tensor inputs and outputs only`,
    );
  }
  const datatype = ORT_TO_DATATYPE[meta.type];
  if (!datatype) {
    throw new ModelportError(
      "MP_ERR_MODEL_LOAD_FAILED",
      `'${meta.name}' has element type ${meta.type}, which modelport does not carry`,
    );
  }
  // Symbolic dims (strings) and unknown dims are dynamic: -1.
  const shape = meta.shape.map((d) => (typeof d === "number" && d >= 0 ? d : -1));
  const named = meta.shape.some((d) => typeof d === "string" && d !== "");
  const dimNames = meta.shape.map((d) => (typeof d === "string" && d !== "" ? d : null));
  return { name: meta.name, datatype, shape, ...(named ? { dimNames } : {}) };
}

function isBatchable(signature: Omit<ModelSignature, "batchable">): boolean {
  const all = [...signature.inputs, ...signature.outputs];
  return all.length > 0 && all.every((s) => s.shape !== undefined && s.shape.length > 0 && s.shape[0] === -1);
}

function toOrt(ort: Ort, tensor: Tensor): OrtTensor {
  const type = DATATYPE_TO_ORT[tensor.datatype];
  const data = tensor.datatype === "FP16" ? toHalfBits(tensor.data as Float32Array) : tensor.data;
  return new ort.Tensor(type, data as never, tensor.shape);
}

function fromOrt(name: string, value: OrtTensor): Tensor {
  const datatype = ORT_TO_DATATYPE[value.type];
  if (!datatype) {
    throw new ModelportError(
      "MP_ERR_INFERENCE_FAILED",
      `output '${name}' has unsupported type ${value.type}`,
    );
  }
  let data = value.data as Tensor["data"];
  if (datatype === "FP16") data = fromHalfBits(value.data as Uint16Array);
  return { datatype, shape: [...value.dims], data };
}

/** Loads ONNX files with onnxruntime-node on the CPU execution provider. */
export class OnnxBackend implements Backend {
  readonly name = "onnx" as const;

  async load(options: LoadOptions): Promise<LoadedModel> {
    const ort = await loadOrt();
    await stat(options.path).catch(() => {
      throw new ModelportError("MP_ERR_MODEL_LOAD_FAILED", `model file ${options.path} does not exist`);
    });
    let session: import("onnxruntime-node").InferenceSession;
    try {
      session = await ort.InferenceSession.create(options.path, {
        intraOpNumThreads: options.threads,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all",
        // No silent CPU fallback: a model configured for the GPU must run there or not load.
        executionProviders: [options.device === "cuda" ? "cuda" : "cpu"],
      });
    } catch (err) {
      const message = (err as Error).message;
      if (options.device === "cuda") {
        throw new ModelportError(
          "MP_ERR_MODEL_LOAD_FAILED",
          `device cuda: onnxruntime's CUDA execution provider could not start (${message}). It needs an NVIDIA GPU, its driver, CUDA 12 and cuDNN 9, and onnxruntime-node installed with its CUDA files (ONNXRUNTIME_NODE_INSTALL=cuda12 MODELPORT_INSTALL=cuda npm install modelport); use device: cpu otherwise`,
        );
      }
      throw new ModelportError(
        "MP_ERR_MODEL_LOAD_FAILED",
        `onnxruntime could not load ${options.path}: ${message}`,
      );
    }
    const inputs = session.inputMetadata.map(toSpec);
    const outputs = session.outputMetadata.map(toSpec);
    const signature: ModelSignature = { inputs, outputs, batchable: isBatchable({ inputs, outputs }) };
    let closed = false;
    return {
      signature,
      async predict(feeds: TensorMap): Promise<TensorMap> {
        const ortFeeds: Record<string, OrtTensor> = {};
        for (const [name, tensor] of Object.entries(feeds)) ortFeeds[name] = toOrt(ort, tensor);
        let results: Record<string, OrtTensor>;
        try {
          results = (await session.run(ortFeeds)) as Record<string, OrtTensor>;
        } catch (err) {
          throw new ModelportError(
            "MP_ERR_INFERENCE_FAILED",
            `the model could not score these inputs: ${(err as Error).message}`,
          );
        }
        const out: TensorMap = {};
        for (const [name, value] of Object.entries(results)) out[name] = fromOrt(name, value);
        return out;
      },
      async close() {
        if (closed) return;
        closed = true;
        await session.release();
      },
    };
  }
}
