// Debian's Python as a client that is not modelport's: whether it can speak gRPC here, and stubs
// generated from the .proto modelport ships.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT } from "./server.js";

export const PYTHON = "/usr/bin/python3";

/** A test's skip reason where python3-grpcio and python3-grpc-tools are missing, else false. */
export function grpcPythonSkip(): string | false {
  const ok = existsSync(PYTHON) && spawnSync(PYTHON, ["-c", "import grpc, grpc_tools"]).status === 0;
  return ok ? false : "python3-grpcio and python3-grpc-tools are not installed (apt-get install them)";
}

/** A new folder holding inference_pb2.py and inference_pb2_grpc.py, generated from src/grpc/inference.proto. */
export function pythonGrpcStubs(): string {
  const out = mkdtempSync(join(tmpdir(), "modelport-grpc-py-"));
  const proto = join(REPO_ROOT, "src", "grpc");
  const gen = spawnSync(
    PYTHON,
    [
      "-m",
      "grpc_tools.protoc",
      `-I${proto}`,
      `--python_out=${out}`,
      `--grpc_python_out=${out}`,
      join(proto, "inference.proto"),
    ],
    { encoding: "utf8" },
  );
  if (gen.status !== 0) throw new Error(`grpc_tools.protoc failed: ${gen.stderr}`);
  return out;
}
