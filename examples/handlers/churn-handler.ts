// A custom handler: feature engineering and decoding around the churn-tree ONNX model.
// Clients send customer records in business terms (contract as text, autopay as a boolean);
// the handler builds the model's feature row, scores it, and answers with a decision.
// In your own project import the types from "modelport" instead of the relative path.
import type { HandlerContext, HandlerSignature, LoadedModel, TensorMap } from "../../src/index.js";

const CONTRACT_MONTHS: Record<string, number> = { "month-to-month": 1, "one-year": 12, "two-year": 24 };

let model: LoadedModel;
let ctx: HandlerContext;
let threshold = 0.5;

export async function load(context: HandlerContext): Promise<HandlerSignature> {
  ctx = context;
  model = await ctx.loadModel({
    backend: "onnx",
    path: String(ctx.options.model ?? "../models/churn-tree.onnx"),
  });
  threshold = Number(ctx.options.threshold ?? 0.5);
  return {
    inputs: [
      { name: "tenure_months", datatype: "INT64", shape: [-1], description: "months as a customer" },
      { name: "monthly_charges", datatype: "FP64", shape: [-1], description: "current monthly bill" },
      {
        name: "support_calls",
        datatype: "INT64",
        shape: [-1],
        description: "support calls in the last 90 days",
      },
      {
        name: "contract",
        datatype: "BYTES",
        shape: [-1],
        description: Object.keys(CONTRACT_MONTHS).join(" | "),
      },
      { name: "autopay", datatype: "BOOL", shape: [-1] },
      { name: "data_gb", datatype: "FP64", shape: [-1], description: "monthly data use" },
    ],
    outputs: [
      { name: "churn", datatype: "BOOL", shape: [-1], description: `probability >= ${threshold}` },
      { name: "probability", datatype: "FP32", shape: [-1] },
      { name: "risk", datatype: "BYTES", shape: [-1], description: "low | medium | high" },
    ],
    batchable: true,
  };
}

export async function predict(batch: TensorMap): Promise<TensorMap> {
  const contract = batch.contract!.data as string[];
  const n = contract.length;
  const col = (name: string) => batch[name]!.data as ArrayLike<number | bigint>;
  const [tenure, charges, calls, autopay, data] = [
    "tenure_months",
    "monthly_charges",
    "support_calls",
    "autopay",
    "data_gb",
  ].map(col);
  const features = new Float32Array(n * 6);
  for (let i = 0; i < n; i++) {
    const months = CONTRACT_MONTHS[contract[i]!];
    if (months === undefined) {
      throw ctx.badInput(
        `contract of row ${i} is '${contract[i]}'; use one of ${Object.keys(CONTRACT_MONTHS).join(", ")}`,
      );
    }
    features.set(
      [
        Number(tenure![i]),
        Number(charges![i]),
        Number(calls![i]),
        months,
        Number(autopay![i]),
        Number(data![i]),
      ],
      i * 6,
    );
  }
  const scored = await model.predict({ features: { datatype: "FP32", shape: [n, 6], data: features } });
  const probs = scored.probabilities!.data as Float32Array;
  const probability = new Float32Array(n);
  const churn = new Uint8Array(n);
  const risk: string[] = [];
  for (let i = 0; i < n; i++) {
    const p = probs[i * 2 + 1]!;
    probability[i] = p;
    churn[i] = p >= threshold ? 1 : 0;
    risk.push(p < 0.3 ? "low" : p < 0.6 ? "medium" : "high");
  }
  return {
    churn: { datatype: "BOOL", shape: [n], data: churn },
    probability: { datatype: "FP32", shape: [n], data: probability },
    risk: { datatype: "BYTES", shape: [n], data: risk },
  };
}
