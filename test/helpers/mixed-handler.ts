// A handler model with four inputs of three element sizes, for the tests of tensor transports
// (binary bodies, shared memory): every byte layout and offset rule meets FP32, FP64 and UINT8 at once.

/**
 * The handler module's source: a and b [n, width] FP32, c [n, cWidth] FP64, d [n, 1] UINT8, in the
 * order a, d, c, b; it answers sum = a + b, c2 = c × 2 and d, on its own thread, unbatched.
 */
export function mixedHandler(width: number, cWidth: number): string {
  return `export function load() {
  return {
    inputs: [
      { name: "a", datatype: "FP32", shape: [-1, ${width}] },
      { name: "d", datatype: "UINT8", shape: [-1, 1] },
      { name: "c", datatype: "FP64", shape: [-1, ${cWidth}] },
      { name: "b", datatype: "FP32", shape: [-1, ${width}] },
    ],
    outputs: [
      { name: "sum", datatype: "FP32", shape: [-1, ${width}] },
      { name: "c2", datatype: "FP64", shape: [-1, ${cWidth}] },
      { name: "d", datatype: "UINT8", shape: [-1, 1] },
    ],
    batchable: false,
  };
}
export async function predict(batch) {
  const a = batch.a.data, b = batch.b.data;
  return {
    sum: { datatype: "FP32", shape: batch.a.shape, data: a.map((v, i) => v + b[i]) },
    c2: { datatype: "FP64", shape: batch.c.shape, data: batch.c.data.map((v) => v * 2) },
    d: { datatype: "UINT8", shape: batch.d.shape, data: batch.d.data.slice() },
  };
}
`;
}
