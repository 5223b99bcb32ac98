// Every Runner through one suite (test/conformance/runner.conformance.ts): the worker thread and
// the supervised child process.
import { ProcessRunner } from "../../src/runner/process-runner.js";
import { WorkerRunner } from "../../src/runner/worker-runner.js";
import { runnerConformance } from "../conformance/runner.conformance.js";

runnerConformance("worker thread", (spec) => new WorkerRunner(spec));
runnerConformance("child process", (spec) => new ProcessRunner(spec));
