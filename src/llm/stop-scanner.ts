// Stop sequences over streamed text: finds the first stop string in the text generated so far,
// even when it spans pieces, and holds back a tail that could still become one, so no delta ever
// contains (part of) a stop sequence. llama-cpp uses this rather than node-llama-cpp's own stop
// triggers, which match piece by piece and miss stops that cross a space between SentencePiece
// pieces (" weigh", "uild f").

export class StopScanner {
  /** The answer so far: everything emitted, never a stop sequence or what follows it. */
  text = "";
  /** True once a stop sequence appeared; later input is ignored. */
  stopped = false;
  private pending = "";
  private readonly longest: number;

  constructor(private readonly stops: readonly string[]) {
    this.longest = stops.reduce((n, s) => Math.max(n, s.length), 0);
  }

  /** Takes newly generated text; returns what may be emitted now ("" when all of it is held back). */
  push(chunk: string): string {
    if (this.stopped) return "";
    const buffer = this.pending + chunk;
    let cut = -1;
    for (const s of this.stops) {
      const i = buffer.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      this.stopped = true;
      this.pending = "";
      return this.emit(buffer.slice(0, cut));
    }
    const hold = this.heldBack(buffer);
    this.pending = buffer.slice(buffer.length - hold);
    return this.emit(buffer.slice(0, buffer.length - hold));
  }

  /** At the end of generation: the held-back tail, which turned out not to be a stop sequence. */
  flush(): string {
    if (this.stopped) return "";
    const rest = this.pending;
    this.pending = "";
    return this.emit(rest);
  }

  private emit(text: string): string {
    this.text += text;
    return text;
  }

  /** Length of the longest end of `buffer` that is the start of some stop sequence. */
  private heldBack(buffer: string): number {
    for (let k = Math.min(this.longest - 1, buffer.length); k > 0; k--) {
      const tail = buffer.slice(buffer.length - k);
      if (this.stops.some((s) => s.startsWith(tail))) return k;
    }
    return 0;
  }
}
