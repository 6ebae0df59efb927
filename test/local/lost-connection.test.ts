import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/**
 * A healthy engine loses one connection before it answers (a keep-alive race, a reset on the way):
 * the activator stops routing to it, the control plane re-checks it and finds nothing wrong, so no
 * tier changes. The data plane must learn on its own that the engine is reachable again, or every
 * later request waits out its hold budget while the model shows `ready`.
 */
test("a connection the engine drops before answering: sent again to the same engine, and the model keeps serving", {
  timeout: 20_000,
}, async () => {
  snooze = await startWith(`
models:
  qwen:
    holdBudget: 5s
    command: ${simCommand()}
`);
  const ask = () => fetch(`${snooze!.url}/v1/chat/completions`, chat("qwen"));
  expect((await ask()).status).toBe(200);
  const address = snooze.autoscaler.controller("qwen")!.state().address!;
  const set = await fetch(`http://${address}/sim/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ dropConnection: 1 }),
  });
  expect(set.status).toBe(200);

  const started = performance.now();
  const retried = await ask();
  expect(retried.status).toBe(200);
  // Sent again at once, not after the hold budget.
  expect(performance.now() - started).toBeLessThan(2_000);
  const after = performance.now();
  expect((await Promise.all([ask(), ask(), ask()])).map((r) => r.status)).toEqual([200, 200, 200]);
  expect(performance.now() - after).toBeLessThan(2_000);
  // The same engine served them all: nothing was restarted.
  expect(snooze.autoscaler.controller("qwen")!.state().address).toBe(address);
  expect(snooze.activator.routes.get("qwen")!.tier).toBe("ready");
});
