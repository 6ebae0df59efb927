// Draws one trace's spans as a waterfall (SVG), from spans collected by test/tracing/collector.test.ts
// (run it with SNOOZE_TRACE_DUMP=spans.json). With --png, headless Chromium renders the SVG to a PNG.
//
//   node_modules/.bin/node hack/trace-waterfall.ts spans.json out.svg [--png out.png] [--pick cold-start|swap]
//
// `cold-start` (default) draws the trace of the first request whose own trace holds a start
// activation; `swap` draws the first swap that woke a sleeping target (its own trace) together
// with the request that waited on it. Links are drawn as dashed arrows.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  service?: string;
  attrs?: Record<string, unknown>;
  links?: { traceId: string; spanId: string }[];
}

const args = process.argv.slice(2);
const option = (name: string) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const [value] = args.splice(i, 2).slice(1);
  return value;
};
const png = option("--png");
const pick = option("--pick") ?? "cold-start";
const [input, output] = args;
if (!input || !output) {
  console.error("usage: hack/trace-waterfall.ts spans.json out.svg [--png out.png] [--pick cold-start|swap]");
  process.exit(2);
}
const spans = JSON.parse(readFileSync(input, "utf8")) as Span[];
const byId = new Map(spans.map((s) => [s.spanId, s]));
const start = (s: Span) => Number(BigInt(s.startTimeUnixNano) / 1000n) / 1000;
const end = (s: Span) => Number(BigInt(s.endTimeUnixNano) / 1000n) / 1000;

let chosen: Span[];
let title: string;
if (pick === "swap") {
  const swap = spans.find(
    (s) => s.name === "snooze.swap" && spans.some((w) => w.name === "snooze.wake" && w.traceId === s.traceId),
  );
  if (!swap) throw new Error("no swap with a wake among the spans");
  const waiting = spans.filter(
    (s) => s.name === "snooze.hold" && s.links?.some((l) => l.spanId === swap.spanId),
  );
  const requests = new Set(waiting.map((h) => h.traceId));
  chosen = spans.filter((s) => s.traceId === swap.traceId || requests.has(s.traceId));
  title = `A swap: ${swap.attrs?.["snooze.swap.from"]} → ${swap.attrs?.["snooze.swap.to"]} (the request, then the swap's own trace)`;
} else {
  const activation = spans.find(
    (s) =>
      s.name === "snooze.activation" &&
      s.attrs?.["snooze.activation"] === "start" &&
      spans.some((r) => r.kind === 2 && r.traceId === s.traceId),
  );
  if (!activation) throw new Error("no cold start in a request's trace among the spans");
  chosen = spans.filter((s) => s.traceId === activation.traceId);
  title = `A cold start of ${activation.attrs?.["snooze.model"]}, inside the caller's trace`;
}

// Depth-first order: each span under its parent, siblings by start time; traces one after another.
const children = new Map<string, Span[]>();
const roots: Span[] = [];
for (const s of chosen) {
  const parent = s.parentSpanId && byId.has(s.parentSpanId) ? s.parentSpanId : undefined;
  if (parent && chosen.includes(byId.get(parent)!))
    children.set(parent, [...(children.get(parent) ?? []), s]);
  else roots.push(s);
}
const rows: { span: Span; depth: number }[] = [];
const walk = (s: Span, depth: number) => {
  rows.push({ span: s, depth });
  for (const c of (children.get(s.spanId) ?? []).sort((a, b) => start(a) - start(b))) walk(c, depth + 1);
};
for (const r of roots.sort((a, b) => start(a) - start(b))) walk(r, 0);

const t0 = Math.min(...rows.map((r) => start(r.span)));
const t1 = Math.max(...rows.map((r) => end(r.span)));
const width = 1000;
const label = 300;
const rowHeight = 26;
const top = 50;
const plot = width - label - 30;
const x = (ms: number) => label + ((ms - t0) / Math.max(1, t1 - t0)) * plot;
const colors: Record<number, string> = { 1: "#7aa6d8", 2: "#e3a34a", 3: "#6dbb7c" };
const kinds: Record<number, string> = { 1: "internal", 2: "server", 3: "client" };
const xml = (text: string) => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;");
const height = top + rows.length * rowHeight + 50;

const parts: string[] = [
  `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="13">`,
  `<rect width="100%" height="100%" fill="white"/>`,
  `<text x="12" y="24" font-size="15" font-weight="bold">${xml(title)}</text>`,
];
// A scale every step ms.
const span = t1 - t0;
const step = [10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000].find((s) => span / s <= 8) ?? 10_000;
for (let ms = 0; ms <= span; ms += step) {
  const at = x(t0 + ms);
  parts.push(`<line x1="${at}" y1="${top - 6}" x2="${at}" y2="${height - 40}" stroke="#eee"/>`);
  parts.push(`<text x="${at}" y="${height - 24}" text-anchor="middle" fill="#666">${ms} ms</text>`);
}
const rowOf = new Map<string, number>();
rows.forEach(({ span: s, depth }, i) => {
  rowOf.set(s.spanId, i);
  const y = top + i * rowHeight;
  if (i > 0 && depth === 0)
    parts.push(
      `<line x1="8" y1="${y - 3}" x2="${width - 8}" y2="${y - 3}" stroke="#bbb" stroke-dasharray="2 3"/>`,
    );
  const x0 = x(start(s));
  const w = Math.max(2, x(end(s)) - x0);
  parts.push(
    `<text x="${12 + depth * 16}" y="${y + 15}">${xml(s.name)} <tspan fill="#888">${kinds[s.kind] ?? ""}</tspan></text>`,
    `<rect x="${x0}" y="${y + 3}" width="${w}" height="${rowHeight - 8}" rx="3" fill="${colors[s.kind] ?? "#aaa"}"/>`,
    `<text x="${Math.min(x0 + w + 4, width - 60)}" y="${y + 15}" fill="#444">${(end(s) - start(s)).toFixed(0)} ms</text>`,
  );
});
// Links (a hold to the activation or swap it waited on).
for (const { span: s } of rows)
  for (const link of s.links ?? []) {
    const from = rowOf.get(s.spanId);
    const to = rowOf.get(link.spanId);
    if (from === undefined || to === undefined) continue;
    const target = byId.get(link.spanId)!;
    const lx = x(start(target)) - 6;
    parts.push(
      `<path d="M ${label - 8} ${top + from * rowHeight + 13} C ${label - 40} ${top + from * rowHeight + 13}, ${label - 40} ${top + to * rowHeight + 13}, ${lx} ${top + to * rowHeight + 13}" fill="none" stroke="#c55" stroke-dasharray="4 3"/>`,
    );
  }
parts.push(
  `<text x="12" y="${height - 8}" fill="#666">orange: server span · green: client span (the engine call) · blue: internal · dashed red: a span link (the hold waited on it)</text>`,
  "</svg>",
);
writeFileSync(output, `${parts.join("\n")}\n`);
console.log(`wrote ${output} (${rows.length} spans)`);

if (png) {
  const chromium = process.env.SNOOZE_CHROMIUM ?? "/usr/bin/chromium";
  execFileSync(
    chromium,
    [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--hide-scrollbars",
      `--window-size=${width},${height}`,
      `--screenshot=${resolve(png)}`,
      `file://${resolve(output)}`,
    ],
    { stdio: "ignore" },
  );
  console.log(`wrote ${png} (rendered by ${chromium})`);
}
