// The CLI's logger: pino JSON lines, pretty-printed when the stream is a terminal.
import { type Logger, pino } from "pino";

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
      transport: {
        target: "pino-pretty",
        options: { colorize: true, translateTime: "HH:MM:ss.l", destination: fd },
      },
    });
  }
  return pino({ level }, pino.destination({ fd, sync: fd === 2 }));
}
