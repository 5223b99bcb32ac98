// What of an upstream's answer may travel further: an upstream's error text can quote the API
// key it was sent (or another credential), and it ends up in client answers, logs and status.
// Every text taken from an upstream passes through here first: known secrets and anything that
// looks like a bearer token or provider key are replaced, control characters dropped, and the
// length bounded. URLs lose their user-info and query before they are quoted.

/** Longest upstream message modelport repeats. */
export const MAX_UPSTREAM_MESSAGE = 300;

const REDACTED = "[redacted]";

/** Shapes of credentials worth hiding even when they are not the configured key. */
const TOKEN_PATTERNS: readonly [RegExp, string][] = [
  // Authorization header values quoted back: "Bearer abc…", "Basic abc…".
  [/\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{4,}/gi, `$1 ${REDACTED}`],
  // Provider key formats: OpenAI/Anthropic sk-…, Hugging Face hf_…, Google AIza…, GitHub, GitLab, Slack.
  [/\b(sk|rk|pk)-[A-Za-z0-9_-]{6,}/g, `$1-${REDACTED}`],
  [/\b(hf_|AIza|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abpr]-)[A-Za-z0-9_-]{6,}/g, `$1${REDACTED}`],
  // key=…, "api_key": "…", token: … as a service may echo a request back.
  [
    /\b((?:api[_-]?key|access[_-]?token|token|secret|password)["']?\s*[:=]\s*["']?)[^\s"',;}&]{4,}/gi,
    `$1${REDACTED}`,
  ],
];

/** `text` with every known secret (4+ characters) and every token-shaped string replaced. */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join(REDACTED);
  for (const [pattern, replacement] of TOKEN_PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * An upstream's text as modelport may repeat it: redacted first (so a key cut in half by the
 * bound cannot slip through), then control characters replaced and the length bounded.
 */
export function safeUpstreamText(
  text: string,
  secrets: readonly (string | undefined)[] = [],
  max = MAX_UPSTREAM_MESSAGE,
): string {
  // Control characters (newlines included) would let a message forge log lines.
  const clean = redactSecrets(text, secrets)
    .replace(/\p{Cc}+/gu, " ")
    .trim();
  return clean.length > max ? `${clean.slice(0, max)}…` : clean;
}

/** An upstream's error code or type when it is a short identifier; anything else is dropped. */
export function safeIdentifier(v: unknown): string | undefined {
  return typeof v === "string" && /^[A-Za-z0-9_.:-]{1,64}$/.test(v) ? v : undefined;
}

/** A URL fit to quote: no user-info, query or fragment (any of which may carry a credential). */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = "";
    u.password = "";
    u.search = "";
    u.hash = "";
    return u.toString();
  } catch {
    return "(an unparseable URL)";
  }
}
