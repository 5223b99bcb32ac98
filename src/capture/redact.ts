// Redaction paths of payload capture (a model's capture.redact): their syntax, checked when the
// configuration loads, and the copy of a body with the named fields replaced by "[redacted]".
// The syntax is deliberately small: dot-separated segments, each an object key, an array index
// (digits, which also match an object key of those digits) or `*` (every key of an object, every
// element of an array). `inputs.ssn`, `rows.*.3`, `messages.*.content`. A key holding a dot or
// named `*` cannot be addressed. Bodies are never changed in place: what the request handler and
// the client see stays as it was; only the parts along a matching path are copied.
// No imports: config/schema.ts validates paths with it, below every other capture file.

/** What a redacted field is replaced with. */
export const REDACTED = "[redacted]";

/** Most segments in one path; deeper bodies are bounded by limits.maxJsonDepth anyway. */
const MAX_SEGMENTS = 64;

/** A path's segments; `*` is the wildcard. */
export type RedactPath = readonly string[];

/** Why `path` is not a valid redaction path, or undefined when it is. */
export function redactPathProblem(path: string): string | undefined {
  if (path === "") return "a redaction path must not be empty";
  const segments = path.split(".");
  if (segments.length > MAX_SEGMENTS) return `'${path}' has more than ${MAX_SEGMENTS} segments`;
  if (segments.some((s) => s === ""))
    return `'${path}' has an empty segment; write segments separated by single dots, like inputs.ssn or rows.*.3`;
  if (segments.some((s) => s !== "*" && s.includes("*")))
    return `'${path}': '*' must be a whole segment (every key or element), like rows.*.3`;
  return undefined;
}

/** The segments of a valid path. @throws Error when it is not valid (config validation comes first). */
export function parseRedactPath(path: string): RedactPath {
  const problem = redactPathProblem(path);
  if (problem) throw new Error(problem);
  return Object.freeze(path.split("."));
}

const hasOwn = (o: object, k: string) => Object.hasOwn(o, k);

/** `node` with what `path` (from segment `i`) names replaced; the same object when nothing matched. */
function redactAt(node: unknown, path: RedactPath, i: number): unknown {
  if (i === path.length) return REDACTED;
  if (node === null || typeof node !== "object") return node;
  const seg = path[i]!;
  if (Array.isArray(node)) {
    if (seg === "*") {
      let out: unknown[] | undefined;
      node.forEach((el, j) => {
        const r = redactAt(el, path, i + 1);
        if (r !== el) {
          out ??= node.slice();
          out[j] = r;
        }
      });
      return out ?? node;
    }
    if (!/^\d+$/.test(seg)) return node;
    const j = Number(seg);
    if (j >= node.length) return node;
    const r = redactAt(node[j], path, i + 1);
    if (r === node[j]) return node;
    const out = node.slice();
    out[j] = r;
    return out;
  }
  const obj = node as Record<string, unknown>;
  const keys = seg === "*" ? Object.keys(obj) : hasOwn(obj, seg) ? [seg] : [];
  let out: Record<string, unknown> | undefined;
  for (const k of keys) {
    const r = redactAt(obj[k], path, i + 1);
    if (r !== obj[k]) {
      out ??= { ...obj };
      out[k] = r;
    }
  }
  return out ?? node;
}

/** A copy of `value` with every field any of `paths` names replaced by "[redacted]"; `value` itself is never changed. */
export function redact(value: unknown, paths: readonly RedactPath[]): unknown {
  let out = value;
  for (const p of paths) out = redactAt(out, p, 0);
  return out;
}
