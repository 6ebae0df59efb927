/** What every scenario gets: a scratch directory, the run's size and a progress log. */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface BenchContext {
  /** Scratch directory for configs and logs; removed after the run. */
  dir: string;
  /** Shorter runs, fewer rounds: a smoke test of the harness, not a measurement. */
  quick: boolean;
  /**
   * Smaller still (implies quick): every scenario in a few seconds, for the test that keeps the
   * harness working (hack/bench/bench.test.ts). Its numbers mean nothing.
   */
  tiny?: boolean;
  /** When set, the activator writes V8 CPU profiles here. */
  profileDir?: string;
  log(message: string): void;
}

/** Writes a snooze.yaml for one scenario and returns its path. */
export function writeSnoozeYaml(ctx: BenchContext, name: string, yaml: string): string {
  const dir = join(ctx.dir, name);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "snooze.yaml");
  writeFileSync(file, yaml);
  return file;
}

/** A command array as YAML flow (JSON is valid YAML). */
export function yamlArgv(argv: readonly string[]): string {
  return `[${argv.map((arg) => JSON.stringify(arg)).join(", ")}]`;
}

/** POSTs JSON and returns the status and body text. */
export async function postJson(url: string, body: unknown, timeoutMs = 30_000) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: response.status, text: await response.text() };
}

/** Polls `predicate` every 20 ms until it holds; throws after `timeoutMs`. */
export async function until(predicate: () => Promise<boolean> | boolean, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Rotates `items` by `round`, so no target always runs first (or last) in a round. */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const k = round % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
