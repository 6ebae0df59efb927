/**
 * Runs wrk (a C load generator, its own process) against one URL with a POST
 * body and reads its exact latency percentiles from a Lua `done` hook.
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export interface WrkOptions {
  url: string;
  body: string;
  connections: number;
  threads?: number;
  durationSeconds: number;
  /** Where the Lua script is written. */
  dir: string;
}

export interface WrkResult {
  requests: number;
  durationSeconds: number;
  requestsPerSecond: number;
  /** Connect, read, write and timeout errors, plus non-2xx/3xx answers. */
  errors: number;
  /** Latency in microseconds. */
  latency: { mean: number; p50: number; p90: number; p99: number; max: number };
}

function luaScript(body: string): string {
  // A long bracket string holds any JSON without escaping.
  return `wrk.method = "POST"
wrk.body = [==[${body}]==]
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK {"requests":%d,"duration_us":%d,"errors":%d,"mean":%.3f,"p50":%d,"p90":%d,"p99":%d,"max":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout + e.status,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
`;
}

let scripts = 0;

export async function runWrk(options: WrkOptions): Promise<WrkResult> {
  // A script per run: runs side by side (--tiny) must not rewrite one another's.
  const script = join(options.dir, `wrk-post-${++scripts}.lua`);
  writeFileSync(script, luaScript(options.body));
  const args = [
    "-t",
    String(options.threads ?? 1),
    "-c",
    String(options.connections),
    "-d",
    `${options.durationSeconds}s`,
    "--timeout",
    "10s",
    "-s",
    script,
    options.url,
  ];
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      "wrk",
      args,
      { timeout: (options.durationSeconds + 20) * 1000, killSignal: "SIGKILL" },
      (error, out, err) => (error ? reject(new Error(`wrk failed: ${error.message}\n${err}`)) : resolve(out)),
    );
  });
  const line = stdout.split("\n").find((l) => l.startsWith("WRK "));
  if (!line) throw new Error(`wrk printed no result:\n${stdout}`);
  const raw = JSON.parse(line.slice(4)) as Record<string, number>;
  const durationSeconds = raw.duration_us! / 1e6;
  return {
    requests: raw.requests!,
    durationSeconds,
    requestsPerSecond: raw.requests! / durationSeconds,
    errors: raw.errors!,
    latency: { mean: raw.mean!, p50: raw.p50!, p90: raw.p90!, p99: raw.p99!, max: raw.max! },
  };
}
