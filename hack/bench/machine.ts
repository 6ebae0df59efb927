/** Facts about the machine a benchmark ran on, for the report. */
import { spawnSync } from "node:child_process";
import { cpus, loadavg, totalmem } from "node:os";

export interface MachineFacts {
  date: string;
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  nginx: string;
  wrk: string;
  loadAverage: string;
}

function versionOf(command: string, args: string[], pattern: RegExp): string {
  // nginx -v and wrk -v print to stderr, and wrk exits 1.
  const run = spawnSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return pattern.exec(`${run.stdout ?? ""}${run.stderr ?? ""}`)?.[1] ?? "unknown";
}

export function machineFacts(): MachineFacts {
  return {
    date: new Date().toISOString().slice(0, 16).replace("T", " "),
    cores: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? "unknown",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    nginx: versionOf("nginx", ["-v"], /nginx\/(\S+)/),
    wrk: versionOf("wrk", ["-v"], /wrk (\S+)/),
    loadAverage: loadavg()
      .map((v) => v.toFixed(2))
      .join(" "),
  };
}
