/**
 * Memory per held request: requests for a model whose engine never comes up
 * (`snooze sim --fault-never-ready`: the process runs, its port never opens)
 * are held for their whole budget. For N held requests the activator
 * process's memory after a forced full GC (node --expose-gc) is compared with
 * before: once against the state with the N client connections already open
 * and idle (the held request alone), once against the state before they were
 * opened (the request with its connection: what a client really costs).
 * A first pass holds a few hundred and lets them go, so lazily built code and
 * pools are not billed to the first N.
 */
import { join } from "node:path";
import { type ActivatorProcess, startActivator } from "./activator.ts";
import { forkClient } from "./child.ts";
import type { BurstCommand } from "./clients/burst.ts";
import { type BenchContext, until, writeSnoozeYaml, yamlArgv } from "./context.ts";

export interface MemoryStep {
  held: number;
  /** Bytes per held request, request alone (against open idle connections). */
  heapPerRequest: number;
  externalPerRequest: number;
  rssPerRequest: number;
  /** Bytes per held request including its connection. */
  heapPerConnection: number;
  externalPerConnection: number;
  rssPerConnection: number;
}

export interface MemoryResult {
  steps: MemoryStep[];
}

const request = JSON.stringify({
  model: "bench",
  messages: [{ role: "user", content: "Hold this for me." }],
  max_tokens: 16,
});

type Usage = NodeJS.MemoryUsage;
const external = (m: Usage) => m.external + m.arrayBuffers;

async function holdMany(activator: ActivatorProcess, count: number, measure: boolean): Promise<MemoryStep> {
  const before = await activator.memory();
  const client = await forkClient<BurstCommand>("./clients/burst.ts", {
    origin: activator.url,
    path: "/v1/chat/completions",
    healthPath: "/healthz",
    body: request,
    count,
    timeoutMs: 300_000,
  });
  try {
    const { connected } = await client.ask<{ connected: number }>({ cmd: "connect" });
    if (connected < count) throw new Error(`only ${connected} of ${count} connections opened`);
    const connectedUsage = measure ? await activator.memory() : before;
    await client.ask({ cmd: "fire" });
    await until(
      async () => (await activator.route("bench")).held >= count,
      60_000,
      `${count} held requests (held: ${(await activator.route("bench")).held})`,
    );
    const heldUsage = measure ? await activator.memory() : before;
    return {
      held: count,
      heapPerRequest: (heldUsage.heapUsed - connectedUsage.heapUsed) / count,
      externalPerRequest: (external(heldUsage) - external(connectedUsage)) / count,
      rssPerRequest: (heldUsage.rss - connectedUsage.rss) / count,
      heapPerConnection: (heldUsage.heapUsed - before.heapUsed) / count,
      externalPerConnection: (external(heldUsage) - external(before)) / count,
      rssPerConnection: (heldUsage.rss - before.rss) / count,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
    await until(async () => (await activator.route("bench")).held === 0, 30_000, "held requests to leave");
  }
}

export async function memory(ctx: BenchContext): Promise<MemoryResult> {
  const counts = ctx.tiny ? [50] : ctx.quick ? [500] : [1_000, 5_000];
  const config = writeSnoozeYaml(
    ctx,
    "memory",
    `models:
  bench:
    holdBudget: 30m
    startTimeout: 30m
    queueDepth: 20000
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", "--fault-never-ready"])}
`,
  );
  const activator = await startActivator(config, {
    cpuProfileDir: ctx.profileDir ? join(ctx.profileDir, "memory") : undefined,
  });
  try {
    await holdMany(activator, ctx.tiny ? 20 : 300, false);
    const steps: MemoryStep[] = [];
    for (const count of counts) {
      const step = await holdMany(activator, count, true);
      ctx.log(
        `memory: ${count} held: ${(step.heapPerRequest / 1024).toFixed(1)} KiB heap + ` +
          `${(step.externalPerRequest / 1024).toFixed(1)} KiB external per request, ` +
          `RSS ${(step.rssPerConnection / 1024).toFixed(1)} KiB per request with its connection`,
      );
      steps.push(step);
    }
    return { steps };
  } finally {
    await activator.close();
  }
}
