/**
 * A/B of what a person waits for through `snooze serve`: the first request to a cold model (the
 * process's first engine start, the engine's load set to 0 so Snooze's own part shows) and a
 * request to the same model asleep at level 1 (wake time 0), this checkout beside another one
 * (`BENCH_BASELINE`, e.g. a worktree of the previous commit), each in a `snooze serve` of its own,
 * the two alternating round by round. Also the RSS of each `snooze serve` after its activations.
 *
 *   BENCH_BASELINE=<another checkout> node hack/bench/serve-ab.ts [--rounds 6] [--wakes 20]
 *
 * Prints medians; loopback only, every wait bounded.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { postJson, until } from "./context.ts";
import { freePort, host } from "./ports.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({ options: { rounds: { type: "string" }, wakes: { type: "string" } } });
const rounds = Number(values.rounds ?? 6);
const wakes = Number(values.wakes ?? 20);
const baseline = process.env.BENCH_BASELINE;
if (!baseline) {
  console.error("serve-ab: set BENCH_BASELINE to another checkout (e.g. a worktree of the previous commit)");
  process.exit(2);
}
const checkouts = { this: fileURLToPath(new URL("../..", import.meta.url)), baseline };

const dir = mkdtempSync(join(tmpdir(), "snooze-serve-ab-"));
const config = join(dir, "snooze.yaml");
writeFileSync(
  config,
  `models:
  m:
    command: ["\${SNOOZE}", sim, --served-model-name, m, --port, "\${PORT}", --load-time, 0s, --enable-sleep-mode, --wake-time-l1, 0ms, --ttft, 0ms, --itl, 0ms]
`,
);

const chat = { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 1 };
const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

interface Readings {
  coldMs: number[];
  wakeMs: number[];
  rssMiB: number[];
}
const readings: Record<keyof typeof checkouts, Readings> = {
  this: { coldMs: [], wakeMs: [], rssMiB: [] },
  baseline: { coldMs: [], wakeMs: [], rssMiB: [] },
};

async function measure(name: keyof typeof checkouts): Promise<void> {
  const port = await freePort();
  const url = `http://${host}:${port}`;
  const child: ChildProcess = spawn(
    process.execPath,
    [join(checkouts[name], "bin/snooze.js"), "serve", "--config", config, "--port", String(port)],
    { stdio: "ignore", env: { ...process.env, SNOOZE_LOG_LEVEL: "error" } },
  );
  const exited = once(child, "exit");
  try {
    await until(
      () =>
        fetch(`${url}/healthz`).then(
          (r) => r.ok,
          () => false,
        ),
      20_000,
      "snooze serve",
    );
    const ask = async () => {
      const started = performance.now();
      const { status } = await postJson(`${url}/v1/chat/completions`, chat);
      if (status !== 200) throw new Error(`${name}: answered ${status}`);
      return performance.now() - started;
    };
    readings[name].coldMs.push(await ask());
    for (let i = 0; i < wakes; i++) {
      const { status } = await postJson(`${url}/snooze/v1/models/m/sleep`, {});
      if (status !== 200) throw new Error(`${name}: sleep answered ${status}`);
      readings[name].wakeMs.push(await ask());
    }
    readings[name].rssMiB.push(rssMiB(child.pid!));
    console.log(
      `${name}: cold ${readings[name].coldMs.at(-1)!.toFixed(0)} ms, wake median ${median(readings[name].wakeMs.slice(-wakes)).toFixed(2)} ms`,
    );
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

try {
  for (let round = 0; round < rounds; round++) {
    const order: (keyof typeof checkouts)[] = round % 2 === 0 ? ["baseline", "this"] : ["this", "baseline"];
    for (const name of order) await measure(name);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const row = (name: keyof typeof checkouts) => {
  const r = readings[name];
  return `| ${name} | ${median(r.coldMs).toFixed(1)} | ${median(r.wakeMs).toFixed(2)} | ${median(r.rssMiB).toFixed(1)} |`;
};
const ratio = (pick: (r: Readings) => number[]) =>
  (median(pick(readings.this)) / median(pick(readings.baseline))).toFixed(2);
console.log(`${rounds} rounds, alternating; ${wakes} wakes per round; medians`);
console.log("| checkout | first cold start → answer, ms | asleep-1 → answer, ms | RSS after, MiB |");
console.log("| --- | --- | --- | --- |");
console.log(row("baseline"));
console.log(row("this"));
console.log(
  `this / baseline: cold ${ratio((r) => r.coldMs)}×, wake ${ratio((r) => r.wakeMs)}×, RSS ${ratio((r) => r.rssMiB)}×`,
);
