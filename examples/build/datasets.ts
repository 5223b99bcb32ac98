// Deterministic synthetic data sets for the trained example models. Each generator takes a seed, so
// the build uses one sample for training and the tests can draw a fresh one to check accuracy.
import { quantize, Random } from "./random.js";

export interface Dataset {
  featureNames: readonly string[];
  /** One array per row; every value is exactly representable in float32. */
  rows: number[][];
  /** Class index per row. */
  labels: number[];
}

export const CHURN_FEATURES = [
  "tenure_months",
  "monthly_charges",
  "support_calls",
  "contract_months",
  "autopay",
  "data_gb",
] as const;

const sigmoid = (z: number): number => 1 / (1 + Math.exp(-z));

/**
 * Customer churn: label 1 when the customer left. The churn log-odds follow a plausible rule (short
 * tenure, high charges, many support calls, month-to-month contract and no autopay raise churn; data
 * use barely matters) plus noise, so no model can be perfect but a good one clearly beats guessing.
 */
export function churnData(n: number, seed: number): Dataset {
  const rng = new Random(seed);
  const rows: number[][] = [];
  const labels: number[] = [];
  for (let i = 0; i < n; i++) {
    const contract = [1, 12, 24][rng.pick([0.5, 0.3, 0.2])]!;
    const tenure = rng.int(0, 72);
    // Quarter-dollar and half-gigabyte steps keep the values exact in float32 and short in JSON.
    const charges = quantize(rng.uniform(20, 120), 0.25);
    const supportCalls = Math.min(10, Math.floor(-Math.log(1 - rng.next()) * 1.6));
    const autopay = rng.bernoulli(contract === 1 ? 0.35 : 0.65) ? 1 : 0;
    const dataGb = quantize(rng.uniform(0, 100), 0.5);
    const logit =
      1.3 -
      0.055 * tenure +
      0.03 * (charges - 70) +
      0.45 * supportCalls -
      (contract === 12 ? 1.3 : contract === 24 ? 2.4 : 0) -
      0.9 * autopay -
      0.004 * dataGb +
      0.5 * rng.normal();
    rows.push([tenure, charges, supportCalls, contract, autopay, dataGb]);
    labels.push(rng.bernoulli(sigmoid(logit)) ? 1 : 0);
  }
  return { featureNames: CHURN_FEATURES, rows, labels };
}

export const SEGMENT_FEATURES = ["recency", "frequency", "monetary", "online_share"] as const;
export const SEGMENT_NAMES = ["bargain_hunters", "loyal_regulars", "online_big_spenders"] as const;

/** Standardised (z-score) centres of the three customer segments; the blobs overlap on purpose. */
const SEGMENT_CENTRES = [
  [0.9, -0.8, -0.7, 0.1],
  [-0.8, 0.9, 0.1, -0.7],
  [-0.1, -0.2, 0.9, 1.0],
];
/** Per-segment spread: the regulars are tight, the online spenders widely scattered. */
const SEGMENT_SPREAD = [0.75, 0.6, 0.9];

/** Customer segments: 3 Gaussian blobs in 4 standardised features, classes in equal proportion. */
export function segmentData(n: number, seed: number): Dataset {
  const rng = new Random(seed);
  const rows: number[][] = [];
  const labels: number[] = [];
  for (let i = 0; i < n; i++) {
    const k = i % 3;
    const centre = SEGMENT_CENTRES[k]!;
    // 1/32 steps: exact in float32, at most five decimals in JSON.
    rows.push(centre.map((c) => quantize(c + SEGMENT_SPREAD[k]! * rng.normal(), 1 / 32)));
    labels.push(k);
  }
  return { featureNames: SEGMENT_FEATURES, rows, labels };
}

/** Splits off the last `testFraction` of a shuffled copy; the shuffle is seeded so the split is fixed. */
export function trainTestSplit(
  data: Dataset,
  testFraction: number,
  seed: number,
): { train: Dataset; test: Dataset } {
  const order = new Random(seed).shuffle(data.rows.map((_, i) => i));
  const nTest = Math.round(data.rows.length * testFraction);
  const pick = (idx: number[]): Dataset => ({
    featureNames: data.featureNames,
    rows: idx.map((i) => data.rows[i]!),
    labels: idx.map((i) => data.labels[i]!),
  });
  return { train: pick(order.slice(nTest)), test: pick(order.slice(0, nTest)) };
}

/** Share of rows whose label is the most common one: the accuracy of always guessing it. */
export function majorityRate(labels: readonly number[]): number {
  const counts = new Map<number, number>();
  for (const y of labels) counts.set(y, (counts.get(y) ?? 0) + 1);
  return Math.max(...counts.values()) / labels.length;
}

export function accuracy(predicted: readonly number[], labels: readonly number[]): number {
  let hits = 0;
  for (let i = 0; i < labels.length; i++) if (predicted[i] === labels[i]) hits++;
  return hits / labels.length;
}
