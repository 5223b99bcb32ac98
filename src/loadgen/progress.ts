// Progress on stderr: a redrawn bar while load runs when stderr is a terminal, and one plain
// line per finished run either way (so logs and CI output stay readable).
import type { LoadPhase } from "./load.js";

export class Progress {
  private readonly tty: boolean;
  private drawn = false;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = stream.isTTY === true;
  }

  /** Redraws the bar (terminals only). `label` names the run, e.g. "c=8" or "[3/21] P=1 T=2". */
  update(label: string, p: LoadPhase): void {
    if (!this.tty) return;
    const width = 24;
    const share = Math.min(1, p.totalS > 0 ? p.elapsedS / p.totalS : 1);
    const filled = Math.round(share * width);
    const bar = `${"=".repeat(filled)}${filled < width ? ">" : ""}${" ".repeat(Math.max(0, width - filled - 1))}`;
    const rate = p.elapsedS > 0 ? Math.round(p.responses / p.elapsedS) : 0;
    const phase = p.phase === "warmup" ? "warm-up" : "measure";
    const text = `${label} ${phase} [${bar}] ${Math.min(p.elapsedS, p.totalS).toFixed(1)}/${p.totalS} s  ${rate} req/s`;
    const columns = this.stream.columns ?? 100;
    this.stream.write(`\r\x1b[2K${text.slice(0, columns - 1)}`);
    this.drawn = true;
  }

  /** Clears the bar and writes `line`. */
  line(line: string): void {
    if (this.drawn) this.stream.write("\r\x1b[2K");
    this.drawn = false;
    this.stream.write(`${line}\n`);
  }
}
