import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Tier } from "../../../lib/replica-event.ts";
import type { ReplayResult } from "./replay.ts";

/**
 * One day of one slot as an SVG: a lane per model and policy, the model's tier as coloured bands
 * over the 24 hours, each request as a tick above (red when it met a sleeping or cold engine),
 * and each prewarm as a bar below (green: a request came; purple: a staged start that reached
 * its sleep; grey: wasted). `toPng` renders it with
 * headless Chromium.
 */
const colours: Record<Tier, string> = {
  ready: "#2e7d32",
  draining: "#81c784",
  waking: "#f9a825",
  starting: "#ef6c00",
  "asleep-1": "#90caf9",
  "asleep-2": "#1e88e5",
  cold: "#eeeeee",
};

export interface PlotInput {
  title: string;
  dayStart: number;
  models: string[];
  runs: ReplayResult[];
}

export function daySvg(input: PlotInput): string {
  const { dayStart, models, runs } = input;
  const dayEnd = dayStart + 86_400_000;
  const left = 190;
  const width = 1500;
  const plotWidth = width - left - 20;
  const laneHeight = 34;
  const groupGap = 26;
  const top = 60;
  const x = (t: number) => left + ((t - dayStart) / 86_400_000) * plotWidth;
  const parts: string[] = [];
  let y = top;
  for (const run of runs) {
    parts.push(`<text x="10" y="${y + 4}" font-size="15" font-weight="bold">${escapeXml(run.policy)}</text>`);
    y += 14;
    for (const model of models) {
      parts.push(`<text x="10" y="${y + 21}" font-size="13">${escapeXml(model)}</text>`);
      for (const s of run.tiers) {
        if (s.model !== model || s.to <= dayStart || s.from >= dayEnd) continue;
        const x0 = x(Math.max(s.from, dayStart));
        const x1 = x(Math.min(s.to, dayEnd));
        if (x1 - x0 < 0.05) continue;
        parts.push(
          `<rect x="${x0.toFixed(2)}" y="${y + 10}" width="${(x1 - x0).toFixed(2)}" height="14" fill="${colours[s.tier]}"/>`,
        );
      }
      for (const o of run.outcomes) {
        if (o.model !== model || o.at < dayStart || o.at >= dayEnd) continue;
        const hit = o.met !== "ready" && !(o.met === "draining" && o.waitMs === 0);
        parts.push(
          `<line x1="${x(o.at).toFixed(2)}" x2="${x(o.at).toFixed(2)}" y1="${y + 2}" y2="${y + 9}" stroke="${hit ? "#c62828" : "#424242"}" stroke-width="${hit ? 1.4 : 0.6}"/>`,
        );
      }
      for (const p of run.prewarms) {
        if (p.model !== model || p.until < dayStart || p.began >= dayEnd) continue;
        const end = Math.min(p.ended ?? p.until, p.until);
        const x0 = x(Math.max(p.began, dayStart));
        const x1 = Math.max(x0 + 2, x(Math.min(end, dayEnd)));
        parts.push(
          `<rect x="${x0.toFixed(2)}" y="${y + 26}" width="${(x1 - x0).toFixed(2)}" height="5" fill="${p.outcome === "hit" ? "#00c853" : p.outcome === "asleep" ? "#7e57c2" : "#9e9e9e"}"/>`,
        );
      }
      y += laneHeight;
    }
    y += groupGap;
  }
  // Hours.
  const axis: string[] = [];
  for (let h = 0; h <= 24; h += 2) {
    const hx = x(dayStart + h * 3_600_000);
    axis.push(
      `<line x1="${hx}" x2="${hx}" y1="${top - 6}" y2="${y - groupGap}" stroke="#bdbdbd" stroke-width="0.5"/>`,
    );
    axis.push(
      `<text x="${hx}" y="${top - 10}" font-size="11" text-anchor="middle">${String(h).padStart(2, "0")}:00</text>`,
    );
  }
  const legend = [
    ...Object.entries(colours).map(([tier, colour]) => [tier, colour] as const),
    ["request", "#424242"],
    ["request that met a sleeping or cold engine", "#c62828"],
    ["prewarm, hit", "#00c853"],
    ["prewarm, staged to sleep", "#7e57c2"],
    ["prewarm, wasted", "#9e9e9e"],
  ];
  let lx = left;
  let legendY = y + 4;
  const legendParts = legend.map(([label, colour]) => {
    const advance = 24 + label.length * 6.6;
    // A legend wider than the plot goes on in a second row.
    if (lx + advance > width) {
      lx = left;
      legendY += 20;
    }
    const part = `<rect x="${lx}" y="${legendY}" width="12" height="12" fill="${colour}"/><text x="${lx + 16}" y="${legendY + 11}" font-size="12">${escapeXml(label)}</text>`;
    lx += advance;
    return part;
  });
  const height = legendY + 30;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="17" font-weight="bold">${escapeXml(input.title)}</text>`,
    ...axis,
    ...parts,
    ...legendParts,
    "</svg>",
  ].join("\n");
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

const browsers = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

/** Renders the SVG to a PNG with headless Chromium; false (and why) when none is installed. */
export function toPng(svg: string, out: string): { ok: true } | { ok: false; reason: string } {
  const browser = browsers.find((b) => existsSync(b));
  if (!browser) return { ok: false, reason: "no Chromium found (apt-get install -y chromium)" };
  const size = /width="(\d+)" height="(\d+)"/.exec(svg)!;
  const dir = mkdtempSync(join(tmpdir(), "snooze-plot-"));
  try {
    const page = join(dir, "plot.svg");
    writeFileSync(page, svg);
    const result = spawnSync(
      browser,
      [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        `--user-data-dir=${join(dir, "profile")}`,
        `--window-size=${size[1]},${size[2]}`,
        `--screenshot=${out}`,
        `file://${page}`,
      ],
      { encoding: "utf8", timeout: 120_000 },
    );
    if (result.status !== 0 || !existsSync(out))
      return {
        ok: false,
        reason: `chromium failed: ${result.stderr.trim().split("\n").slice(-3).join(" ")}`,
      };
    return { ok: true };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
