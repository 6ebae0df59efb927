import { afterAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * Many requests held for a cold model, released when it is ready: every one is answered, and the
 * engine never sees more connections than maxConnections (the rest wait in the hold queue, where
 * the hold budget applies, instead of in an unbounded pool that runs out of file descriptors).
 */
let snooze: LocalSnooze | undefined;
afterAll(() => snooze?.close(1_000));

const count = 1_000;

describe(`${count} held requests`, () => {
  test("all answered 200; the engine's load never exceeds maxConnections", async () => {
    snooze = await startWith(`
models:
  qwen:
    maxConnections: 32
    queueDepth: 5000
    command: ${simCommand(["--load-time", "1s", "--max-num-seqs", "512"], 1)}
`);
    const url = snooze.url;
    const responses = Array.from({ length: count }, () =>
      fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "qwen", prompt: "hi", max_tokens: 2 }),
        signal: AbortSignal.timeout(60_000),
      }).then(
        async (r) => ({ status: r.status, text: await r.text() }),
        (error: Error) => ({ status: 0, text: error.message }),
      ),
    );
    const route = snooze.activator.routes.get("qwen")!;
    await until(() => route.replicas().some((r) => r.address), 20_000, "the engine to get an address");
    // Sample the engine's own count of requests it holds (running + waiting) while the release runs.
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const address = route.replicas().find((r) => r.tier === "ready")?.address;
        if (address) {
          const state = (await (await fetch(`http://${address}/sim/state`)).json()) as {
            running: number;
            waiting: number;
          };
          most = Math.max(most, state.running + state.waiting);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    const results = await Promise.all(responses);
    sampling = false;
    await sampler;
    const byStatus = new Map<number, number>();
    for (const { status } of results) byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    const failures = results.filter((r) => r.status !== 200).slice(0, 3);
    expect(Object.fromEntries(byStatus), JSON.stringify(failures)).toEqual({ 200: count });
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(32);
  }, 90_000);
});
