import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, test } from "vitest";

/**
 * Keeps `npm run bench` and `npm run bench:slots` working end to end: each scenario in its tiny
 * configuration (`--tiny`: seconds, not minutes; its numbers mean nothing and are not checked),
 * the docs left untouched (`--no-write`), every table printed. The scenarios run side by side,
 * each in its own `npm run bench -- --only`, so the whole takes about as long as the slowest.
 */
const run = promisify(execFile);
const repo = fileURLToPath(new URL("../..", import.meta.url));

async function bench(script: string, args: string[], env: Record<string, string> = {}) {
  const { stdout } = await run(process.execPath, [script, ...args], {
    cwd: repo,
    timeout: 90_000,
    killSignal: "SIGKILL",
    maxBuffer: 16 * 1024 * 1024,
    env: { ...process.env, SNOOZE_LOG_LEVEL: "error", ...env },
  });
  return stdout;
}

describe("the benchmarks run", () => {
  test("npm run bench -- --tiny prints every scenario's table", { timeout: 120_000 }, async () => {
    const [warm, activation, rest] = await Promise.all(
      ["warm-path", "activation", "streaming,memory,idle-rss,swap"].map((only) =>
        bench("hack/bench/main.ts", ["--tiny", "--no-write", "--only", only]),
      ),
    );
    expect(warm).toContain("#### Warm path");
    expect(warm).toMatch(/\| activator +\| \d+/);
    expect(activation).toContain("#### Activation overhead");
    expect(activation).toMatch(/failed requests: 0;/);
    expect(rest).toContain("#### Streaming");
    expect(rest).toMatch(/\| activator +\| \d+ +\| [\d.]+ +\| [\d.]+ +\| [\d.]+ +\| 20\/20 /);
    expect(rest).toContain("#### Memory per held request");
    expect(rest).toMatch(/\| snooze sim +\| [\d.]+ +\| [\d.]+ /);
    expect(rest).toContain("#### Swap between two models on one slot");
    expect(rest).toMatch(/^\| activator +\| \d+ +\| \d+ +\| 2 +\| 0 +\|$/m);
  });

  test("the accept-queue probe watches two bursts", { timeout: 60_000 }, async () => {
    const out = await bench("hack/bench/accept-queue.ts", ["--streams", "20", "--seconds", "2"]);
    expect(out).toMatch(/^burst 1: 2 s: 20 started, 0 unaccepted$/m);
    expect(out).toMatch(/^burst 2: 2 s: 20 started, 0 unaccepted$/m);
  });

  test("serve-ab prints its table (this checkout as its own baseline)", { timeout: 60_000 }, async () => {
    const out = await bench("hack/bench/serve-ab.ts", ["--rounds", "1", "--wakes", "1"], {
      BENCH_BASELINE: repo,
    });
    expect(out).toMatch(/^\| this \| [\d.]+ \| [\d.]+ \| [\d.]+ \|$/m);
    expect(out).toMatch(/^this \/ baseline: cold [\d.]+×, wake [\d.]+×, RSS [\d.]+×$/m);
  });

  test("busy-slot-memory prints its table", { timeout: 60_000 }, async () => {
    const out = await bench("hack/bench/busy-slot-memory.ts", ["--requests", "50", "--rounds", "1"]);
    expect(out).toMatch(/^\| this \| 50 \| \d+ \| [\d.]+ \| [\d.]+ \|$/m);
  });

  test("npm run bench:slots prints its tables", { timeout: 60_000 }, async () => {
    const out = await bench("hack/bench/slots/run.ts", ["--seeds", "1", "--no-write"]);
    expect(out).toContain("## Slot policies (simulated)");
    expect(out).toMatch(/^\| sticky +\| +\d+ \|/m);
    expect(out).toContain("Robustness.");
  });
});
