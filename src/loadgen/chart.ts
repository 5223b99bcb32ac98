// A hand-written SVG chart of a bench run: two panels sharing the concurrency axis, latency
// (p50 and p99, ms) above and throughput (requests/s) below, each with labelled axes and a legend.
// No dependency; the .html variant wraps the same SVG with a results table.

export interface ChartPoint {
  concurrency: number;
  rps: number;
  p50: number | null;
  p99: number | null;
}

export interface ChartOptions {
  title: string;
  subtitle?: string;
}

const W = 760;
const H = 600;
const LEFT = 80;
const RIGHT = 30;
const PANELS = [
  { top: 84, bottom: 290 },
  { top: 370, bottom: 540 },
] as const;
const COLORS = { p50: "#1f77b4", p99: "#d62728", rps: "#2ca02c" };

/** Escapes text for XML content and attribute values. */
export function escapeXml(s: string): string {
  return s.replace(
    /[<>&"']/g,
    (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" })[c]!,
  );
}

/** Round tick step for an axis from 0 to `max`: 1, 2, 2.5 or 5 × 10^k, about `count` ticks. */
export function niceTicks(max: number, count = 5): number[] {
  if (!(max > 0) || !Number.isFinite(max)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks: number[] = [];
  for (let t = 0; t < max + step * 0.999; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function tickLabel(v: number): string {
  if (v >= 1_000_000) return `${Number((v / 1e6).toPrecision(4))}M`;
  return Number(v.toPrecision(6)).toLocaleString("en-US");
}

const f = (x: number) => x.toFixed(1);

interface Series {
  label: string;
  color: string;
  dash?: string;
  values: (number | null)[];
}

function panel(
  index: 0 | 1,
  xs: readonly number[],
  xLabels: readonly string[],
  series: readonly Series[],
  yTitle: string,
): string {
  const { top, bottom } = PANELS[index];
  const right = W - RIGHT;
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter((v): v is number => v !== null)));
  const ticks = niceTicks(max === 0 ? 1 : max);
  const yMax = ticks[ticks.length - 1]!;
  const y = (v: number) => bottom - (v / yMax) * (bottom - top);
  const out: string[] = [`<g class="panel">`];
  // Grid and y axis ticks.
  for (const t of ticks) {
    out.push(
      `<line x1="${LEFT}" y1="${f(y(t))}" x2="${right}" y2="${f(y(t))}" stroke="#e5e5e5"/>`,
      `<text x="${LEFT - 8}" y="${f(y(t) + 4)}" text-anchor="end" font-size="12">${tickLabel(t)}</text>`,
    );
  }
  // Axes.
  out.push(
    `<line x1="${LEFT}" y1="${top}" x2="${LEFT}" y2="${bottom}" stroke="#333"/>`,
    `<line x1="${LEFT}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333"/>`,
  );
  xs.forEach((x, i) => {
    out.push(
      `<line x1="${f(x)}" y1="${bottom}" x2="${f(x)}" y2="${bottom + 5}" stroke="#333"/>`,
      `<text x="${f(x)}" y="${bottom + 20}" text-anchor="middle" font-size="12">${escapeXml(xLabels[i]!)}</text>`,
    );
  });
  const midY = (top + bottom) / 2;
  out.push(
    `<text x="${f(LEFT + (right - LEFT) / 2)}" y="${bottom + 40}" text-anchor="middle" font-size="13">concurrency (connections)</text>`,
    `<text x="22" y="${f(midY)}" text-anchor="middle" font-size="13" transform="rotate(-90 22 ${f(midY)})">${escapeXml(yTitle)}</text>`,
  );
  // Lines and points; a missing value breaks the line.
  for (const s of series) {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null) {
        pen = false;
        return;
      }
      d += `${pen ? "L" : "M"}${f(xs[i]!)},${f(y(v))}`;
      pen = true;
    });
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : "";
    if (d) out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    s.values.forEach((v, i) => {
      if (v === null) return;
      out.push(
        `<circle cx="${f(xs[i]!)}" cy="${f(y(v))}" r="3.5" fill="${s.color}"><title>${escapeXml(`${s.label} at concurrency ${xLabels[i]}: ${tickLabel(v)}`)}</title></circle>`,
      );
    });
  }
  // Legend above the plot, right-aligned on the panel title's line, so it never covers data.
  let lx = right;
  for (const s of [...series].reverse()) {
    lx -= 34 + s.label.length * 7;
    const ly = top - 16;
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : "";
    out.push(
      `<line x1="${lx}" y1="${ly}" x2="${lx + 24}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
      `<text x="${lx + 30}" y="${ly + 4}" font-size="12">${escapeXml(s.label)}</text>`,
    );
    lx -= 16;
  }
  out.push("</g>");
  return out.join("\n");
}

/** The chart as a standalone SVG document. */
export function chartSvg(points: readonly ChartPoint[], opts: ChartOptions): string {
  const sorted = [...points].sort((a, b) => a.concurrency - b.concurrency);
  // Concurrency values are usually spread geometrically (1, 8, 64): evenly spaced categories.
  const inner = W - RIGHT - LEFT;
  const xs = sorted.map(
    (_, i) => LEFT + (sorted.length === 1 ? inner / 2 : 30 + (i * (inner - 60)) / (sorted.length - 1)),
  );
  const labels = sorted.map((p) => String(p.concurrency));
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, sans-serif">`,
    `<title>${escapeXml(opts.title)}</title>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="28" text-anchor="middle" font-size="16" font-weight="bold">${escapeXml(opts.title)}</text>`,
    opts.subtitle
      ? `<text x="${W / 2}" y="48" text-anchor="middle" font-size="12" fill="#555">${escapeXml(opts.subtitle)}</text>`
      : "",
    `<text x="${LEFT}" y="${PANELS[0].top - 12}" font-size="13" font-weight="bold">Latency</text>`,
    panel(
      0,
      xs,
      labels,
      [
        { label: "p50 latency", color: COLORS.p50, values: sorted.map((p) => p.p50) },
        { label: "p99 latency", color: COLORS.p99, dash: "6 4", values: sorted.map((p) => p.p99) },
      ],
      "latency (ms)",
    ),
    `<text x="${LEFT}" y="${PANELS[1].top - 12}" font-size="13" font-weight="bold">Throughput</text>`,
    panel(
      1,
      xs,
      labels,
      [{ label: "throughput (requests/s)", color: COLORS.rps, values: sorted.map((p) => p.rps) }],
      "requests/s",
    ),
    "</svg>",
  ];
  return `${parts.filter(Boolean).join("\n")}\n`;
}

/** The chart in an HTML page, followed by a table of `rows` (already formatted cells). */
export function chartHtml(
  points: readonly ChartPoint[],
  opts: ChartOptions,
  head: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const cells = (tag: string, r: readonly string[]) =>
    `<tr>${r.map((c) => `<${tag}>${escapeXml(c)}</${tag}>`).join("")}</tr>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeXml(opts.title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin-top: 1em; }
th, td { padding: 4px 12px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
</style>
</head>
<body>
${chartSvg(points, opts)}
<table>
${cells("th", head)}
${rows.map((r) => cells("td", r)).join("\n")}
</table>
</body>
</html>
`;
}
