// The latency samples and rounding now live with the shared load generator (src/loadgen/).
export { round, Samples } from "../src/loadgen/stats.js";
