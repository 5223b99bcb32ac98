// Fuzzes a split deployment (docs/Runners.md): a `--role api` process in front of a `--role
// runner` process that holds the example models. Every request goes to both, the API tier and the
// runner directly, over HTTP (native and OIP JSON) and over gRPC (ModelInfer, valid and hostile
// messages of grpc-messages.ts), and the two answers must agree: the same status and MP_ERR code,
// the same outputs. Whatever a client sends through the API tier, it is the runner's answer it
// gets, in the route's shape, and neither process goes down.
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { encode, type Json, mutated, mutatedText, nativeBody, oipBody } from "./arbitraries.js";
import { checkGrpcResult, type GrpcResult, grpcClient } from "./grpc-client.js";
import { describeMessage, hostileMessage, validMessage } from "./grpc-messages.js";
import { check, checkAnswer, essence, send, styleOf, useFuzzServer, warmTree } from "./harness.js";

const server = useFuzzServer({
  warm: warmTree,
  tiers: true,
  grpc: true,
  extra: (models) => [
    `  - {name: multi4k, path: ${join(models, "multi-io.onnx")}, threads: 1, limits: {maxBatchRows: 4096}}`,
  ],
});
const runnerGrpc = grpcClient(() => server.runnerGrpc);
const apiGrpc = grpcClient(() => server.grpc);

/** What must be the same over gRPC: the MP_ERR code, or the version and the outputs to the byte. */
function grpcEssence(r: GrpcResult): unknown {
  if (r.err) return /^(MP_ERR_[A-Z_]+): /.exec(r.err.details)?.[1] ?? r.err.code;
  return [
    r.res.model_version,
    r.res.outputs.map((o: any) => [o.name, o.datatype, o.shape, o.contents]),
    r.res.raw_output_contents.map((b: Buffer) => Buffer.from(b).toString("base64")),
  ];
}

/** Answers compared, by status class: a run must have compared both kinds. */
const seen = { http: { ok: 0, refused: 0 }, grpc: { ok: 0, refused: 0 } };

/** Sends `text` to the runner and through the API tier; both answers checked, then compared. */
async function both(path: string, text: string, what: string): Promise<void> {
  const headers = { "content-type": "application/json" };
  const direct = await send(server.runner, "POST", path, { headers, body: text });
  const via = await send(server.url, "POST", path, { headers, body: text });
  checkAnswer(direct, styleOf(path), { what: `runner: ${what}` });
  checkAnswer(via, styleOf(path), { what: `API tier: ${what}` });
  assert.deepEqual(
    essence(via),
    essence(direct),
    `the API tier answered ${via.status} ${via.text.slice(0, 300)} where the runner answered ${direct.status} ${direct.text.slice(0, 300)}: ${what}`,
  );
  if (via.status === 200) seen.http.ok++;
  else seen.http.refused++;
}

/** A body as text: valid, mutated as a value, or mutated as text. */
const asText = (valid: fc.Arbitrary<Json>): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: valid.map((b) => encode(b)), weight: 2 },
    { arbitrary: mutated(valid, 64).map((b) => encode(b)), weight: 5 },
    { arbitrary: mutatedText(valid), weight: 2 },
  );

/**
 * The property of one route: a body for one of the example models (or for a model that does not
 * exist), as text, to `pathOf(model)` on both processes.
 */
function sameAnswers(
  share: "tiersNative" | "tiersOip",
  bodies: fc.Arbitrary<{ model: string; body: Json }>,
  pathOf: (model: string) => string,
): Promise<void> {
  return check(
    share,
    fc.asyncProperty(
      bodies.chain(({ model, body }) =>
        fc.tuple(fc.constantFrom(model, model, "nope"), asText(fc.constant(body))),
      ),
      async ([model, text]) => {
        const path = pathOf(model);
        await both(path, text, `${path} ${text.slice(0, 300)}`);
      },
    ),
  );
}

describe("split tiers", () => {
  it("native predict: the API tier answers as the runner does, valid or not", () =>
    sameAnswers("tiersNative", nativeBody, (model) => `/v1/models/${model}/predict`));

  it("OIP infer as JSON: the API tier answers as the runner does, valid or not", () =>
    sameAnswers("tiersOip", oipBody, (model) => `/v2/models/${model}/infer`));

  it("gRPC ModelInfer: the API tier answers as the runner does, valid or hostile", () =>
    check(
      "tiersGrpc",
      fc.asyncProperty(
        fc.oneof(
          hostileMessage,
          validMessage(3000).map((v) => v.message),
        ),
        async (m: any) => {
          const what = () => describeMessage(m);
          const direct = await runnerGrpc.unary("ModelInfer", m);
          const via = await apiGrpc.unary("ModelInfer", m);
          checkGrpcResult(direct, () => `runner: ${what()}`);
          checkGrpcResult(via, () => `API tier: ${what()}`);
          assert.deepEqual(
            grpcEssence(via),
            grpcEssence(direct),
            `the API tier answered ${via.err?.details ?? "OK"} where the runner answered ${direct.err?.details ?? "OK"}: ${what()}`,
          );
          if (via.err === null) seen.grpc.ok++;
          else seen.grpc.refused++;
        },
      ),
    ));

  it("both valid and refused requests were compared", (t) => {
    t.diagnostic(JSON.stringify(seen));
    for (const kind of Object.values(seen)) assert.ok(kind.ok > 0 && kind.refused > 0, JSON.stringify(seen));
  });

  server.finalCheck();
});
