/**
 * Summarizes a V8 CPU profile (`--cpu-prof`): where the time went, by
 * function (self time) and by file, so a benchmark miss can be explained.
 *
 *   node hack/bench/profile-summary.ts <file.cpuprofile> [top]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileLine {
  name: string;
  selfMs: number;
  share: number;
}

function shortUrl(url: string): string {
  const at = url.indexOf("node_modules/");
  if (at >= 0) return url.slice(at + "node_modules/".length);
  const repo = /\/(activator|autoscaler|lib|cli|hack)\//.exec(url);
  if (repo) return url.slice(repo.index + 1);
  return url.replace(/^file:\/\//, "") || "(native)";
}

/** Self time per function and per file, largest first; idle and GC are their own lines. */
export function summarizeProfile(profile: Profile): {
  total: number;
  byFunction: ProfileLine[];
  byFile: ProfileLine[];
} {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const functions = new Map<string, number>();
  const files = new Map<string, number>();
  let total = 0;
  for (const [id, micros] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const file = shortUrl(url);
    const name = url ? `${functionName || "(anonymous)"} ${file}:${lineNumber + 1}` : functionName;
    functions.set(name, (functions.get(name) ?? 0) + micros);
    files.set(url ? file : functionName, (files.get(url ? file : functionName) ?? 0) + micros);
    total += micros;
  }
  const lines = (map: Map<string, number>) =>
    [...map]
      .map(([name, micros]) => ({ name, selfMs: micros / 1000, share: micros / total }))
      .sort((a, b) => b.selfMs - a.selfMs);
  return { total: total / 1000, byFunction: lines(functions), byFile: lines(files) };
}

if (import.meta.main) {
  const [file, top = "30"] = process.argv.slice(2);
  if (!file) {
    console.error("usage: profile-summary.ts <file.cpuprofile> [top]");
    process.exit(2);
  }
  const summary = summarizeProfile(JSON.parse(readFileSync(file, "utf8")) as Profile);
  console.log(`total sampled: ${summary.total.toFixed(0)} ms`);
  console.log("\nby function (self):");
  for (const line of summary.byFunction.slice(0, Number(top)))
    console.log(
      `${(line.share * 100).toFixed(1).padStart(5)}%  ${line.selfMs.toFixed(1).padStart(8)} ms  ${line.name}`,
    );
  console.log("\nby file (self):");
  for (const line of summary.byFile.slice(0, Number(top)))
    console.log(
      `${(line.share * 100).toFixed(1).padStart(5)}%  ${line.selfMs.toFixed(1).padStart(8)} ms  ${line.name}`,
    );
}
