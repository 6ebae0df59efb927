/**
 * CPU time of processes from /proc (Linux), so the proxy under test is measured
 * from outside the same way whatever it is: the activator's Node process or
 * nginx's master and workers.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { readProcStat } from "../../lib/proc-stat.ts";

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** User + system CPU seconds a process has used so far, all its threads included; 0 when gone. */
export function cpuSeconds(pid: number): number {
  const stat = readProcStat(pid);
  return stat ? (stat.utime + stat.stime) / clockTicks() : 0;
}

/** Process ids whose parent is `pid`, found by scanning /proc. */
export function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    if (readProcStat(Number(entry))?.ppid === pid) children.push(Number(entry));
  }
  return children;
}

/** A memory field of /proc/<pid>/status (`VmRSS`, `VmHWM`, `RssAnon` …) in bytes; 0 when gone. */
function statusBytes(pid: number, field: string): number {
  try {
    const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Resident set size of a process in bytes. */
export const rssBytes = (pid: number) => statusBytes(pid, "VmRSS");
/** The most a process has been resident so far (VmHWM), bytes. */
export const peakRssBytes = (pid: number) => statusBytes(pid, "VmHWM");
/** The anonymous part of the resident set (RssAnon), bytes. */
export const anonRssBytes = (pid: number) => statusBytes(pid, "RssAnon");

/** A CPU meter over a fixed set of processes: `read()` is seconds used since it was made. */
export function cpuMeter(pids: readonly number[]): { read(): number } {
  const total = () => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const start = total();
  return { read: () => total() - start };
}

/**
 * Connection attempts the kernel dropped because a listening socket's accept
 * queue was full (TcpExt ListenOverflows, machine-wide): each costs its client
 * a SYN retransmission, a second or more.
 */
export function listenOverflows(): number {
  try {
    const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const names = lines[i]!.split(" ");
      const values = lines[i + 1]!.split(" ");
      const at = names.indexOf("ListenOverflows");
      if (names[0] === "TcpExt:" && at > 0) return Number(values[at]);
    }
  } catch {}
  return 0;
}

/**
 * With BENCH_PIN_CPUS=1, the CPUs a scenario gives its load (client and engine) and the proxy
 * under test, when the machine has two or more and `taskset` (util-linux) is there. Unpinned,
 * three busy processes share the cores by the scheduler's fairness, which hands a multi-threaded
 * proxy more of them than a single-threaded one. Off by default: on two cores the load's one
 * core saturates first (docs/benchmarks.md), so pinning there measures the load, not the proxy.
 */
export function cpuSplit(): { load: string; proxy: string } | undefined {
  const cpus = availableParallelism();
  if (process.env.BENCH_PIN_CPUS !== "1" || cpus < 2) return undefined;
  try {
    execFileSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" });
  } catch {
    return undefined;
  }
  // The load gets every CPU but the last; the proxy the last one.
  return { load: cpus === 2 ? "0" : `0-${cpus - 2}`, proxy: String(cpus - 1) };
}

/** Pins running processes, every thread of each, to `cpus` (a taskset list, e.g. "1" or "0-2"). */
export function pinTo(pids: readonly number[], cpus: string): void {
  for (const pid of pids) execFileSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
}

/**
 * The receive queue (`ss`'s Recv-Q) of each TCP socket on local `port` in `state`: for a listening
 * socket the connections not yet accepted, for an established one the bytes not yet read. Linux.
 */
export function receiveQueues(port: number, state: "listening" | "established"): number[] {
  return execFileSync("ss", ["-tnH", "state", state, `( sport = :${port} )`], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean)
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}
