// The CLI's logger: pino JSON lines, pretty-printed when the stream is a terminal.
import { type Logger, pino } from "pino";
import { TRACE_LOG_OPTIONS } from "../telemetry/log-fields.js";

/** Log lines are written in chunks of at least this many bytes, or every FLUSH_MS, whichever comes first. */
const CHUNK_BYTES = 4096;
const FLUSH_MS = 200;

/** `fd` 1 (stdout) for the server's logs; 2 (stderr) for commands whose stdout is their result. */
export function createLogger(
  level: string,
  format: "auto" | "json" | "pretty" = "auto",
  fd: 1 | 2 = 1,
): Logger {
  const tty = fd === 1 ? process.stdout.isTTY : process.stderr.isTTY;
  if (format === "pretty" || (format === "auto" && tty)) {
    return pino({
      level,
      ...TRACE_LOG_OPTIONS,
      transport: {
        target: "pino-pretty",
        options: { colorize: true, translateTime: "HH:MM:ss.l", destination: fd },
      },
    });
  }
  if (fd === 2) return pino({ level, ...TRACE_LOG_OPTIONS }, pino.destination({ fd, sync: true }));
  // One write per log line costs a syscall on a libuv thread: at 20,000 requests/s that was
  // ~14% of a core. Buffer into chunks, flushed at least every FLUSH_MS so a quiet server's
  // lines still show at once; logger.flush() on shutdown writes the rest.
  const destination = pino.destination({ fd, sync: false, minLength: CHUNK_BYTES });
  setInterval(() => destination.flush(), FLUSH_MS).unref();
  return pino({ level, ...TRACE_LOG_OPTIONS }, destination);
}
