// `modelport models list|load|unload|promote|rollback [URL]`: change what a running server has
// loaded, through its management routes (docs/Models-over-time.md); they need an admin key.
import { parse, UsageError } from "./args.js";

export const MODELS_HELP = `Usage: modelport models <action> [NAME] [VERSION] [options]

  list                    every model and version: state, and why one is not available
  load NAME               load a model, or reload it: a repository model's new and changed versions
                          load and the newest (by its version policy) takes traffic once checked
  unload NAME             unload every version of NAME once its requests finish
  promote NAME VERSION    make VERSION take NAME's traffic (loaded and checked first if need be)
  rollback NAME           swap back to the version that served before; the current one is held back
  weights NAME V=W ...    canary: split NAME's unversioned traffic by weight (2=90 3=10); --clear ends it
  shadow NAME VERSION     copy live predict calls to VERSION and compare its answers (discarded);
                          --sample S (share, default 1), --tolerance T; --stop ends it

Options:
      --url URL          the server's base URL (default http://127.0.0.1:8080)
      --admin-key KEY    admin key (or MODELPORT_ADMIN_KEY); a server without keys takes loopback callers
      --json             print the server's answer as JSON
      --clear, --stop    weights: end the split; shadow: stop shadowing
  -h, --help             show this help

Exit status: 0 on success; 1 when the server refused or could not be reached; 2 on a usage error.
`;

const ACTIONS = ["list", "load", "unload", "promote", "rollback", "weights", "shadow"];

interface IndexRow {
  name: string;
  version?: string;
  state: string;
  reason: string;
}

export async function models(args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    url: { type: "string" },
    "admin-key": { type: "string" },
    json: { type: "boolean" },
    clear: { type: "boolean" },
    stop: { type: "boolean" },
    sample: { type: "string" },
    tolerance: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  const [action, name, version, ...more] = positionals;
  if (values.help || !action) {
    process.stdout.write(MODELS_HELP);
    return values.help ? 0 : 2;
  }
  if (!ACTIONS.includes(action))
    throw new UsageError(`unknown models action '${action}'; use ${ACTIONS.join(", ")}`);
  if (action !== "list" && !name) throw new UsageError(`models ${action} needs a model name`);
  if (action === "promote" && !version)
    throw new UsageError("models promote needs a model name and a version");
  const base = (values.url ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
  const key = values["admin-key"] ?? process.env.MODELPORT_ADMIN_KEY;
  const model = encodeURIComponent(name ?? "");
  const [path, body]: [string, unknown] =
    action === "list"
      ? ["/v2/repository/index", {}]
      : action === "promote"
        ? [`/v1/models/${model}/promote`, { version }]
        : action === "rollback"
          ? [`/v1/models/${model}/rollback`, {}]
          : action === "weights"
            ? [
                `/v1/models/${model}/weights`,
                { weights: values.clear ? null : weightsOf([version, ...more]) },
              ]
            : action === "shadow"
              ? [`/v1/models/${model}/shadow`, values.stop ? { version: null } : shadowOf(version, values)]
              : [`/v2/repository/models/${model}/${action}`, {}];
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify(body),
    });
  } catch (err) {
    process.stderr.write(
      `modelport: cannot reach ${base}: ${(err as Error).cause ?? (err as Error).message}\n`,
    );
    return 1;
  }
  const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) {
    const message =
      typeof answer.error === "string"
        ? answer.error
        : ((answer.error as { message?: string })?.message ?? res.statusText);
    process.stderr.write(`modelport: ${action} failed (${res.status}): ${message}\n`);
    return 1;
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  if (action === "list") {
    const rows = answer as unknown as IndexRow[];
    const lines = rows.map((r) => [r.name, r.version ?? "-", r.state, r.reason]);
    const width = (i: number) =>
      Math.max(...lines.map((l) => l[i]!.length), ["NAME", "VERSION", "STATE"][i]!.length);
    const pad = (l: string[]) =>
      `${l[0]!.padEnd(width(0))}  ${l[1]!.padEnd(width(1))}  ${l[2]!.padEnd(width(2))}  ${l[3]}`.trimEnd();
    process.stdout.write(`${[pad(["NAME", "VERSION", "STATE", "REASON"]), ...lines.map(pad)].join("\n")}\n`);
  } else if (action === "rollback") {
    process.stdout.write(`${name}: rolled back from version ${answer.from} to ${answer.to}\n`);
  } else if (action === "weights" || action === "shadow") {
    process.stdout.write(
      `${name}: ${JSON.stringify(answer.traffic ?? "all traffic to the current version")}\n`,
    );
  } else {
    process.stdout.write(
      `${name}: ${action === "promote" ? `version ${version} promoted` : `${action}ed`}\n`,
    );
  }
  return 0;
}

/** `2=90 3=10` as {"2": 90, "3": 10}. */
function weightsOf(args: (string | undefined)[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of args.filter((x): x is string => x !== undefined)) {
    const m = /^([^=]+)=(\d+(?:\.\d+)?)$/.exec(a);
    if (!m) throw new UsageError(`models weights takes VERSION=WEIGHT pairs (2=90 3=10), got '${a}'`);
    out[m[1]!] = Number(m[2]);
  }
  if (Object.keys(out).length === 0)
    throw new UsageError("models weights needs VERSION=WEIGHT pairs, or --clear");
  return out;
}

function shadowOf(
  version: string | undefined,
  v: { sample?: string; tolerance?: string },
): Record<string, unknown> {
  if (!version) throw new UsageError("models shadow needs a model name and a version, or --stop");
  const num = (flag: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!Number.isFinite(n)) throw new UsageError(`--${flag} must be a number, got '${text}'`);
    return n;
  };
  const sample = num("sample", v.sample);
  const tolerance = num("tolerance", v.tolerance);
  return {
    version,
    ...(sample !== undefined ? { sample } : {}),
    ...(tolerance !== undefined ? { tolerance } : {}),
  };
}
