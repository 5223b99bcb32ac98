// Tracked child processes now live with the shared load generator (src/loadgen/).
export { type Child, spawnChild } from "../src/loadgen/children.js";
