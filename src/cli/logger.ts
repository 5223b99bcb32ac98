// The CLI's logger: pino JSON lines, pretty-printed when stdout is a terminal.
import { type Logger, pino } from "pino";

export function createLogger(level: string, format: "auto" | "json" | "pretty" = "auto"): Logger {
  const pretty = format === "pretty" || (format === "auto" && process.stdout.isTTY);
  if (pretty) {
    return pino({
      level,
      transport: { target: "pino-pretty", options: { colorize: true, translateTime: "HH:MM:ss.l" } },
    });
  }
  return pino({ level });
}
