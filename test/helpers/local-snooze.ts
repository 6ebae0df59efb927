import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { type Logger, silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";

/** A sim engine command for snooze.yaml, with every delay scaled down for tests. */
export { simCommand } from "../../hack/sim/yaml-command.ts";

/** Starts `snooze serve` in this process on a free port from YAML text. */
export async function startWith(yaml: string, log: Logger = silentLogger): Promise<LocalSnooze> {
  const config = parseConfig(yaml, "test.yaml");
  return startLocalSnooze({ config, log, host: "127.0.0.1", port: 0, statsIntervalMs: 200 });
}

export function chat(model: string, extra: Record<string, unknown> = {}) {
  return {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 5, ...extra }),
  };
}

/** Resolves when `predicate` holds, polling every 20 ms; fails after `timeoutMs`. */
export async function until(
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The value of one sample in Prometheus text, or 0. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** Sim flags for engines on one simulated 24 GiB GPU of their own (a fresh ledger per call). */
export function sharedGpu(): string[] {
  const gpuDir = mkdtempSync(join(tmpdir(), "snooze-gpu-"));
  return [
    "--enable-sleep-mode",
    "--gpu-id",
    "0",
    "--gpu-memory",
    "24GiB",
    "--model-memory",
    "16GiB",
    "--gpu-dir",
    gpuDir,
  ];
}
