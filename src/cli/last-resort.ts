// The serving process's last resort: an unhandled rejection or uncaught exception is a bug
// that left the process in an unknown state, so it is logged (with the request id when the
// error carries one), the server drains what it can within a bound, and the process exits 1
// for its supervisor (systemd, Kubernetes, the --processes primary) to start a fresh one.
import type { Logger } from "pino";

/** Time left for closing listeners and stores after the drain, before the exit is forced. */
export const CLOSE_MARGIN_MS = 5000;

/** The request id an error may carry (set by code that knew which request it served). */
function requestIdOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const e = err as { requestId?: unknown; details?: { requestId?: unknown } };
  const id = e.requestId ?? e.details?.requestId;
  return typeof id === "string" ? id : undefined;
}

export interface LastResort {
  /** Sets what a fault drains (the server once it exists); before that a fault exits at once. */
  setDrain(drain: () => Promise<unknown>): void;
}

/**
 * Installs the process-wide handlers. `boundMs` caps drain plus close; past it the process
 * exits 1 anyway. A second fault while draining is logged and does not restart the drain.
 */
export function installLastResort(logger: Logger, boundMs: number): LastResort {
  let drain: (() => Promise<unknown>) | undefined;
  let faulted = false;
  const exit = () => {
    // Write buffered log lines first; exit regardless if flushing fails.
    try {
      logger.flush(() => process.exit(1));
    } catch {
      process.exit(1);
    }
    setTimeout(() => process.exit(1), 1000).unref();
  };
  const onFault = (kind: "unhandledRejection" | "uncaughtException") => (err: unknown) => {
    const requestId = requestIdOf(err);
    logger.fatal(
      { err, kind, ...(requestId ? { reqId: requestId } : {}) },
      `${kind}: a bug left the process in an unknown state; draining and exiting with code 1`,
    );
    if (faulted) return;
    faulted = true;
    process.exitCode = 1;
    if (!drain) {
      exit();
      return;
    }
    // Referenced on purpose: it must fire even when the drain leaves nothing else pending.
    setTimeout(() => {
      logger.error({ boundMs }, "drain did not finish in time after a fault; exiting now");
      exit();
    }, boundMs);
    drain().then(exit, (e: unknown) => {
      logger.error({ err: e }, "error while draining after a fault");
      exit();
    });
  };
  process.on("unhandledRejection", onFault("unhandledRejection"));
  process.on("uncaughtException", onFault("uncaughtException"));
  return {
    setDrain(d) {
      drain = d;
    },
  };
}
