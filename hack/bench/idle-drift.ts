/**
 * Idle memory over minutes: `snooze serve` with idle models (engines never started), its resident
 * set read from outside at fixed moments, with BENCH_BASELINE's checkout running beside it at the
 * same time. The bench's idle-rss scenario reads at 2 s; this is how docs/benchmarks.md saw what an
 * idle serve does after that (and what a change meant to hold it down does).
 *
 *   [BENCH_BASELINE=<checkout>] node hack/bench/idle-drift.ts [--models 50] [--at 2,30,60,90,120,150,180]
 *
 * Each build gets a compile cache of its own, filled by a first start that is not read.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { writeSnoozeYaml, yamlArgv } from "./context.ts";
import { freePort } from "./ports.ts";
import { rssBytes } from "./proc.ts";
import { startServerProcess } from "./server-process.ts";

const { values } = parseArgs({
  options: {
    models: { type: "string", default: "50" },
    at: { type: "string", default: "2,30,60,90,120,150,180" },
  },
});
const moments = values.at.split(",").map(Number);
const dir = mkdtempSync(join(tmpdir(), "snooze-idle-drift-"));
const ctx = { dir, quick: true, log: (message: string) => console.error(message) };
const models = Array.from(
  { length: Number(values.models) },
  (_, i) => `  m${i}:
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}"])}
`,
).join("");
const config = writeSnoozeYaml(ctx, "idle-drift", `models:\n${models}`);
const builds = [
  { name: "this", checkout: fileURLToPath(new URL("../..", import.meta.url)) },
  ...(process.env.BENCH_BASELINE ? [{ name: "baseline", checkout: process.env.BENCH_BASELINE }] : []),
];

async function serve(checkout: string, name: string) {
  const port = await freePort();
  return startServerProcess(
    [process.execPath, join(checkout, "bin/snooze.js"), "serve", "--config", config, "--port", String(port)],
    port,
    {
      NODE_COMPILE_CACHE: join(dir, `cache-${name}`),
      XDG_STATE_HOME: join(dir, `state-${name}`),
      SNOOZE_LOG_LEVEL: "error",
    },
  );
}

try {
  for (const build of builds) await (await serve(build.checkout, build.name)).stop();
  const running = await Promise.all(builds.map((build) => serve(build.checkout, build.name)));
  const started = performance.now();
  const rows = builds.map((build) => [build.name]);
  try {
    for (const at of moments) {
      await new Promise((resolve) =>
        setTimeout(resolve, Math.max(0, at * 1000 - (performance.now() - started))),
      );
      for (const [i, server] of running.entries()) rows[i]!.push((rssBytes(server.pid) / 2 ** 20).toFixed(1));
    }
  } finally {
    for (const server of running) await server.stop();
  }
  console.log(`| build | ${moments.map((at) => `${at} s`).join(" | ")} |`);
  console.log(`| --- | ${moments.map(() => "---").join(" | ")} |`);
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
