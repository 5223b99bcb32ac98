// JSON writes an FP32 value as the shortest text that reads back as it (docs/API.md#numbers-in-json-answers):
// compare FP32 outputs as FP32 against the raw bytes of binary tensors or gRPC.

/** An OIP output with FP32 data rounded to FP32; any other output as it is. */
export function asFp32<T extends { datatype: string; data?: unknown[] }>(o: T): T {
  return o.datatype === "FP32" && o.data ? { ...o, data: o.data.map((v) => Math.fround(v as number)) } : o;
}
