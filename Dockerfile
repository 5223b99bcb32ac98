# modelport's container image: docker build -t modelport:0.1.0 .
# The GPU image (onnxruntime's CUDA execution provider, for `device: cuda`; runner-gpu.yaml):
#   docker build -t modelport:0.1.0-cuda \
#     --build-arg RUNTIME_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 \
#     --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 --build-arg MODELPORT_INSTALL=cuda .
# Two stages: the build (compilers, dev dependencies, tsc) and the runtime (Node, tini and the
# production dependencies only). The runtime runs as uid 10001 with a read-only root filesystem:
# it writes only to /tmp and /var/lib/modelport (its working folder: the SQLite job store and
# usage); models and config are mounted read-only (/models, /etc/modelport), as the Kubernetes
# manifests in deploy/kubernetes/ do. Checked by test/unit/container-image.test.ts; built and run
# by test/integration/container-image.test.ts where a container engine answers.
ARG NODE_VERSION=24
# The runtime stage's base: Node's slim image, or a CUDA runtime with cuDNN (Node is copied in).
ARG RUNTIME_IMAGE=node:${NODE_VERSION}-bookworm-slim

FROM node:${NODE_VERSION}-bookworm-slim AS build
# better-sqlite3 compiles from source when no prebuilt binary can be fetched.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# onnxruntime-node's CPU build ships in its package; its install script fetches its CUDA
# provider from nuget.org only when asked (cuda12).
ARG ONNXRUNTIME_NODE_INSTALL=skip
# The install's lean step (bin/lean-install.js, the package's postinstall) removes what CPU serving
# never loads: llama.cpp's GPU and other-platform builds, onnxruntime's other-platform binaries and
# onnxruntime-web's browser bundles. MODELPORT_INSTALL (cuda, vulkan, full) keeps them.
ARG MODELPORT_INSTALL=
COPY package.json package-lock.json ./
COPY bin/lean-install.js ./bin/
RUN npm ci --no-audit --no-fund
COPY . .
# Production dependencies only, without better-sqlite3's sources and intermediate build files (its
# one .node file stays). node_modules is then under 500 MB.
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/better-sqlite3/deps node_modules/better-sqlite3/build/Release/obj \
    node_modules/better-sqlite3/build/Release/obj.target node_modules/better-sqlite3/build/Release/.deps \
    node_modules/better-sqlite3/build/Release/sqlite3.a node_modules/better-sqlite3/build/Release/test_extension.node

FROM ${RUNTIME_IMAGE}
COPY --from=build /usr/local/bin/node /usr/local/bin/node
# tini: PID 1 that forwards SIGTERM to modelport (its graceful drain) and reaps zombies.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir -p /var/lib/modelport /models /etc/modelport \
  && chown 10001:10001 /var/lib/modelport
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/bin ./bin
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/client ./dist/client
COPY --from=build /src/dist/ui ./dist/ui
COPY --from=build /src/node_modules ./node_modules
ENV NODE_ENV=production
USER 10001:10001
WORKDIR /var/lib/modelport
VOLUME ["/var/lib/modelport"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/livez').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/modelport.js"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "-c", "/etc/modelport/modelport.yaml"]
