// The audit log: one JSON line per admin action (load, unload, promote, rollback, weights,
// shadow; an admin canceling or retrying another key's job; a key file reload), with the key
// name, the action, its target and its result; only actions of callers it can name
// (plugins/admin.ts: those without a valid key are counted in a metric instead). It is its own stream: server.auditLog (a file,
// appended to) or, by default, the server's log with "log":"audit" on each line, so a log
// pipeline can route it apart. A file is written synchronously: admin actions are rare, and a
// line must be in the file, in order, when the action's answer goes out, also when the server
// stops right after (an asynchronous write still in flight at close could land after the lines
// flushed behind it, or not at all).
import { type Logger, pino } from "pino";
import { ensurePrivateFile } from "../private-files.js";

export interface AuditEntry {
  /** The key name that acted. */
  key: string;
  /** What it did: "promote", "load", "job.cancel", ... */
  action: string;
  /** What it acted on: a model, "model@version", a job id. */
  target?: string;
  /** "ok", or the error code it got. */
  result: string;
  /** The HTTP status the action answered. */
  status?: number;
  requestId?: string;
  remoteAddress?: string;
}

export type Audit = (entry: AuditEntry) => void;

/** The audit log: to `file` (server.auditLog) when given, else to `logger`. */
export function createAudit(file: string | undefined, logger: Logger): { audit: Audit; close(): void } {
  // Owner-only when modelport creates it (and its folder): it names keys and what they did.
  if (file) ensurePrivateFile(file);
  const destination = file ? pino.destination({ dest: file, sync: true }) : undefined;
  const log = destination ? pino({ base: undefined }, destination) : logger.child({ log: "audit" });
  return {
    audit: (entry) =>
      log.info(entry, `audit: ${entry.key} ${entry.action} ${entry.target ?? ""} → ${entry.result}`),
    close: () => destination?.end(),
  };
}
