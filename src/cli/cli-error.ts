// How the command line reports an error: one line, `modelport: MP_ERR_…: what happened and what
// to do`, whatever threw it (a modelport error, a bad flag, a config, a file the OS refused);
// the JavaScript stack only with --verbose, since it helps a bug report, not a user.
import { isModelportError } from "../errors.js";
import { UsageError } from "./args.js";

/** The code and message a thrown value is reported with. */
function describe(err: unknown): { code: string; message: string } {
  if (isModelportError(err)) return { code: err.code, message: err.message };
  if (err instanceof UsageError)
    return { code: "MP_ERR_CLI_USAGE", message: `${err.message}; run 'modelport --help'` };
  const e = err as { code?: unknown; message?: unknown; path?: unknown; syscall?: unknown };
  // ConfigError carries its code and lists every problem on its own line: kept as it is.
  if (typeof e?.code === "string" && e.code.startsWith("MP_ERR_"))
    return { code: e.code, message: String(e.message) };
  if (typeof e?.code === "string" && typeof e.path === "string")
    return {
      code: "MP_ERR_CLI_USAGE",
      message: `cannot ${e.syscall === "open" ? "read" : String(e.syscall ?? "use")} ${e.path} (${e.code}); check the path and its permissions`,
    };
  const message = err instanceof Error ? err.message : String(err);
  return {
    code: "MP_ERR_SERVER_INTERNAL",
    message: `${message}; this is a modelport bug: run again with --verbose and report the stack trace`,
  };
}

/**
 * The text to print on stderr for `err`: `modelport: CODE: message` on one line (a config error
 * keeps its list of problems), then the stack when `verbose`.
 */
export function formatCliError(err: unknown, verbose: boolean): string {
  const { code, message } = describe(err);
  const line = `modelport: ${code}: ${code === "MP_ERR_CONFIG_INVALID" ? message : message.replace(/\s*\n\s*/g, " ")}\n`;
  const stack = verbose && err instanceof Error && err.stack ? `${err.stack}\n` : "";
  return line + stack;
}
