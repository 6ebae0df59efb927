/**
 * Every held request gets exactly one answer (issue 11), at a size `npm test` cannot afford:
 * `count` requests (default 10,000) are sent at once, from a client in its own process on
 * preconnected keep-alive connections, to a model whose engine takes a few seconds to start and
 * takes at most `maxConnections` of them at a time; the rest wait in the hold queue. The client
 * records one result per request (status, or the transport error); the script counts them.
 *
 *   node hack/bench/held-answers.ts [--count 10000] [--max-connections 64]
 *
 * Exit code 0 when every request got exactly one answer and all were 200, else 1. Bounded: every
 * request has a 5-minute limit and the whole run 10 minutes.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { startActivator } from "./activator.ts";
import { forkClient } from "./child.ts";
import type { BurstCommand, BurstResult } from "./clients/burst.ts";
import { type BenchContext, writeSnoozeYaml, yamlArgv } from "./context.ts";

const { values } = parseArgs({
  options: {
    count: { type: "string", default: "10000" },
    "max-connections": { type: "string", default: "64" },
  },
});
const count = Number(values.count);
const maxConnections = Number(values["max-connections"]);
const limit = setTimeout(() => {
  console.error("held-answers: still running after 10 min; giving up");
  process.exit(1);
}, 10 * 60_000);
limit.unref();

const dir = mkdtempSync(join(tmpdir(), "snooze-held-answers-"));
const ctx: BenchContext = { dir, quick: false, log: (message) => console.error(message) };
const config = writeSnoozeYaml(
  ctx,
  "held-answers",
  `models:
  bench:
    holdBudget: 5m
    queueDepth: ${count + 1}
    maxConnections: ${maxConnections}
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", "--load-time", "3s", "--max-num-seqs", "256"])}
`,
);
const started = performance.now();
const activator = await startActivator(config);
let code = 1;
try {
  const client = await forkClient<BurstCommand>("./clients/burst.ts", {
    origin: activator.url,
    path: "/v1/completions",
    healthPath: "/healthz",
    body: JSON.stringify({ model: "bench", prompt: "hold me", max_tokens: 2 }),
    count,
    timeoutMs: 5 * 60_000,
  });
  try {
    const { connected } = await client.ask<{ connected: number }>({ cmd: "connect" }, 120_000);
    if (connected < count) throw new Error(`only ${connected} of ${count} connections opened`);
    await client.ask({ cmd: "fire" }, 120_000);
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" }, 6 * 60_000);
    const byStatus: Record<string, number> = {};
    for (const r of results) {
      const key = r.status ? String(r.status) : `error: ${r.error}`;
      byStatus[key] = (byStatus[key] ?? 0) + 1;
    }
    const lastAnswerS =
      (Math.max(...results.map((r) => r.endedAt)) - Math.min(...results.map((r) => r.sentAt))) / 1000;
    console.log(
      `held-answers: ${count} sent, ${results.length} results, by status ${JSON.stringify(byStatus)}; ` +
        `last answer ${lastAnswerS.toFixed(1)} s after the first send; run ${((performance.now() - started) / 1000).toFixed(0)} s`,
    );
    code = results.length === count && byStatus["200"] === count ? 0 : 1;
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
} finally {
  await activator.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
