// createClient and the Client it returns: predict (JSON), predictTensors (binary tensors through
// the Open Inference Protocol's binary extension), infer (OIP JSON), model descriptions, the
// jobs API, and per-model handles typed by a `modelport types` file (createClient<Models>).
import { decodeBinaryResponse, encodeBinaryRequest, INFERENCE_HEADER } from "./binary-infer.js";
import { JobsClient } from "./jobs.js";
import type { TensorInput } from "./tensors.js";
import { type CallOptions, Transport, type TransportOptions } from "./transport.js";
import type {
  AnyModels,
  ModelDescription,
  ModelList,
  ModelName,
  OipRequest,
  OipResponse,
  OutputsOf,
  PredictBody,
  PredictResponse,
  TensorInputsOf,
  TensorOutputsOf,
  TensorResponse,
} from "./types.js";

export type ClientOptions = TransportOptions;

/** Options of a predict or infer call. */
export interface PredictOptions<O extends string = string> extends CallOptions {
  /** A loaded version of the model (default: the one serving unversioned calls). */
  version?: string;
  /** Only these outputs come back. */
  outputs?: O[];
  /** Echoed in the answer. */
  id?: string;
}

const json = <T>(res: Response) => res.json() as Promise<T>;

function modelPath(prefix: "/v1" | "/v2", model: string, version: string | undefined): string {
  const m = `${prefix}/models/${encodeURIComponent(model)}`;
  return version === undefined ? m : `${m}/versions/${encodeURIComponent(version)}`;
}

/** One model's calls, typed by its entry in the model table. */
export interface ModelClient<M, K extends ModelName<M>> {
  readonly name: K;
  predict<O extends keyof OutputsOf<M, K> & string = keyof OutputsOf<M, K> & string>(
    body: PredictBody<M, K>,
    opts?: PredictOptions<O>,
  ): Promise<PredictResponse<Pick<OutputsOf<M, K>, O>>>;
  predictTensors<O extends keyof TensorOutputsOf<M, K> & string = keyof TensorOutputsOf<M, K> & string>(
    inputs: TensorInputsOf<M, K>,
    opts?: PredictOptions<O>,
  ): Promise<TensorResponse<Pick<TensorOutputsOf<M, K>, O>>>;
  infer(request: OipRequest, opts?: PredictOptions): Promise<OipResponse>;
  describe(opts?: CallOptions): Promise<ModelDescription>;
}

export class Client<M = AnyModels> {
  readonly jobs: JobsClient<M>;
  private readonly transport: Transport;

  constructor(options: ClientOptions) {
    this.transport = new Transport(options);
    this.jobs = new JobsClient<M>(this.transport);
  }

  /**
   * POST /v1/models/{model}/predict with `{rows}` or `{inputs}`: the outputs as nested arrays.
   * Retried only where it surely had no effect (docs/Client.md#retries).
   */
  predict<K extends ModelName<M>, O extends keyof OutputsOf<M, K> & string = keyof OutputsOf<M, K> & string>(
    model: K,
    body: PredictBody<M, K>,
    opts: PredictOptions<O> = {},
  ): Promise<PredictResponse<Pick<OutputsOf<M, K>, O>>> {
    const { version, outputs, id, ...call } = opts;
    const payload: Record<string, unknown> = { ...(body as object) };
    if (outputs !== undefined) payload.outputs = outputs;
    if (id !== undefined) payload.id = id;
    return this.transport.call(
      {
        method: "POST",
        path: `${modelPath("/v1", model, version)}/predict`,
        body: JSON.stringify(payload),
        kind: "unsafe",
      },
      call,
      json<PredictResponse<Pick<OutputsOf<M, K>, O>>>,
    );
  }

  /**
   * Typed arrays in, typed arrays out: POST /v2/models/{model}/infer with every input as binary
   * tensor data and every output (or `outputs`) asked back as binary. Any number of inputs; each
   * output's data is the typed array of its datatype (FP32 → Float32Array, INT64 → BigInt64Array,
   * BOOL → Uint8Array of 0/1, FP16 → Float32Array, BYTES → string[]).
   */
  predictTensors<
    K extends ModelName<M>,
    O extends keyof TensorOutputsOf<M, K> & string = keyof TensorOutputsOf<M, K> & string,
  >(
    model: K,
    inputs: TensorInputsOf<M, K>,
    opts: PredictOptions<O> = {},
  ): Promise<TensorResponse<Pick<TensorOutputsOf<M, K>, O>>> {
    const { version, outputs, id, ...call } = opts;
    const req = encodeBinaryRequest(inputs as Record<string, TensorInput>, {
      ...(outputs ? { outputs } : {}),
      ...(id !== undefined ? { id } : {}),
    });
    return this.transport.call(
      {
        method: "POST",
        path: `${modelPath("/v2", model, version)}/infer`,
        headers: { ...req.headers, accept: "application/octet-stream, application/json" },
        body: req.body,
        kind: "unsafe",
      },
      call,
      async (res) => {
        const bytes = new Uint8Array(await res.arrayBuffer());
        const { meta, outputs: tensors } = decodeBinaryResponse(bytes, res.headers.get(INFERENCE_HEADER));
        return { ...meta, outputs: tensors } as unknown as TensorResponse<Pick<TensorOutputsOf<M, K>, O>>;
      },
    );
  }

  /** POST /v2/models/{model}/infer with an Open Inference Protocol JSON body. */
  infer(model: ModelName<M>, request: OipRequest, opts: PredictOptions = {}): Promise<OipResponse> {
    const { version, outputs, id, ...call } = opts;
    const body: OipRequest = { ...request };
    if (outputs !== undefined) body.outputs = outputs.map((name) => ({ name }));
    if (id !== undefined) body.id = id;
    return this.transport.call(
      {
        method: "POST",
        path: `${modelPath("/v2", model, version)}/infer`,
        body: JSON.stringify(body),
        kind: "unsafe",
      },
      call,
      json<OipResponse>,
    );
  }

  /** GET /v1/models: every model (OpenAI's list in `data`) and each tensor model described (`models`). */
  listModels(opts: CallOptions = {}): Promise<ModelList> {
    return this.transport.call(
      { method: "GET", path: "/v1/models", kind: "idempotent" },
      opts,
      json<ModelList>,
    );
  }

  /** GET /v1/models/{model}: its status, inputs and outputs. */
  describe(model: ModelName<M>, opts: CallOptions = {}): Promise<ModelDescription> {
    return this.transport.call(
      { method: "GET", path: modelPath("/v1", model, undefined), kind: "idempotent" },
      opts,
      json<ModelDescription>,
    );
  }

  /** One model's calls, typed by its entry in the model table (`createClient<Models>`). */
  model<K extends ModelName<M>>(name: K): ModelClient<M, K> {
    return {
      name,
      predict: (body, opts) => this.predict(name, body, opts),
      predictTensors: (inputs, opts) => this.predictTensors(name, inputs, opts),
      infer: (request, opts) => this.infer(name, request, opts),
      describe: (opts) => this.describe(name, opts),
    };
  }
}

/**
 * A client for the modelport server at `baseUrl`. Give it the `Models` type written by
 * `modelport types URL` to have model names, inputs and outputs checked by the compiler.
 */
export function createClient<M = AnyModels>(options: ClientOptions): Client<M> {
  if (typeof options?.baseUrl !== "string") throw new TypeError("createClient needs { baseUrl }");
  return new Client<M>(options);
}
