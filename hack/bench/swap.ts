/**
 * A swap between two models on one slot (one GPU): requests alternate between the two, one at a
 * time, so every request finds the other model resident and waits for a swap. Snooze puts the
 * incumbent to sleep and wakes the other (the slot's `fifo` policy, so no minResidency holds the
 * swap back); llama-swap, which has no sleep mode, stops the incumbent and starts the other (its
 * default: one model at a time). Both run the same `snooze sim` engines with the sim's own
 * timings (a vLLM in miniature: 5 s load, 0.5 s sleep, 1 s wake), so what differs is what each
 * does on a swap, and what it adds on top of the engine's time.
 *
 * Without BENCH_LLAMA_SWAP only Snooze runs; the engine's configured sleep + wake is the floor its
 * swap is read against.
 */
import { startActivator } from "./activator.ts";
import { type BenchContext, postJson, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { llamaSwapPeer, simModel, startLlamaSwap } from "./llama-swap.ts";
import { freePort } from "./ports.ts";
import { median } from "./stats.ts";

export interface SwapSide {
  target: "activator" | "llama-swap";
  /** Each swapped request's time from sending to its whole answer, ms. */
  swapsMs: number[];
  p50Ms: number;
  maxMs: number;
  failures: number;
}

export interface SwapResult {
  swaps: number;
  /** The sim's timings, ms. */
  engine: { loadMs: number; sleepMs: number; wakeMs: number };
  sides: SwapSide[];
  /** Snooze's p50 over llama-swap's, with BENCH_LLAMA_SWAP. */
  vsLlamaSwap?: number;
}

const models = ["coder", "chat"] as const;

/** The sim's flags for these timings (after its model name and port). */
function simFlags(t: SwapResult["engine"]): string[] {
  return [
    "--enable-sleep-mode",
    "--load-time",
    `${t.loadMs}ms`,
    "--sleep-time-l1",
    `${t.sleepMs}ms`,
    "--wake-time-l1",
    `${t.wakeMs}ms`,
    "--ttft",
    "0ms",
    "--itl",
    "0ms",
  ];
}

/** Sends one request to each model in turn, `swaps` times after both have started once. */
async function alternate(url: string, swaps: number): Promise<{ times: number[]; failures: number }> {
  const ask = async (model: string) => {
    const started = performance.now();
    const answer = await postJson(
      `${url}/v1/chat/completions`,
      { model, max_tokens: 1, messages: [{ role: "user", content: "Your turn." }] },
      60_000,
    ).catch((error: Error) => ({ status: 0, text: error.message }));
    return { ms: performance.now() - started, ok: answer.status === 200 };
  };
  // Both start once (cold), so every request after that is a swap between two started engines.
  for (const model of models) {
    const first = await ask(model);
    if (!first.ok) throw new Error(`the first request to ${model} at ${url} failed`);
  }
  const times: number[] = [];
  let failures = 0;
  for (let i = 0; i < swaps; i++) {
    const { ms, ok } = await ask(models[i % 2]!);
    if (ok) times.push(ms);
    else failures++;
  }
  return { times, failures };
}

export async function swap(ctx: BenchContext): Promise<SwapResult> {
  const swaps = ctx.tiny ? 2 : ctx.quick ? 4 : 8;
  const engine = ctx.tiny
    ? { loadMs: 300, sleepMs: 50, wakeMs: 100 }
    : { loadMs: 5_000, sleepMs: 500, wakeMs: 1_000 };
  const memberYaml = models
    .map(
      (model) => `  ${model}:
    slot: gpu0
    sleepAfter: 1h
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", ...simFlags(engine)])}
`,
    )
    .join("");
  const config = writeSnoozeYaml(
    ctx,
    "swap",
    `slots:
  gpu0:
    policy: fifo
models:
${memberYaml}`,
  );
  const sides: SwapSide[] = [];
  const record = (target: SwapSide["target"], run: { times: number[]; failures: number }) => {
    const side = {
      target,
      swapsMs: run.times,
      p50Ms: median(run.times),
      maxMs: Math.max(...run.times),
      failures: run.failures,
    };
    ctx.log(
      `swap ${target}: p50 ${side.p50Ms.toFixed(0)} ms, max ${side.maxMs.toFixed(0)} ms, failed ${side.failures}`,
    );
    sides.push(side);
  };

  const activator = await startActivator(config);
  try {
    record("activator", await alternate(activator.url, swaps));
  } finally {
    await activator.close();
  }
  const peer = llamaSwapPeer(ctx);
  if (peer) {
    const ports = await Promise.all(models.map(() => freePort()));
    const llamaSwap = await startLlamaSwap(
      ctx,
      peer,
      "swap-llama-swap",
      Object.fromEntries(models.map((model, i) => [model, simModel(model, ports[i]!, simFlags(engine))])),
    );
    try {
      record("llama-swap", await alternate(llamaSwap.url, swaps));
    } finally {
      await llamaSwap.stop();
    }
  }
  const mine = sides.find((s) => s.target === "activator")!;
  const theirs = sides.find((s) => s.target === "llama-swap");
  return { swaps, engine, sides, ...(theirs ? { vsLlamaSwap: mine.p50Ms / theirs.p50Ms } : {}) };
}
