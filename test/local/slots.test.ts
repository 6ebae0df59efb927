import { afterEach, describe, expect, test } from "vitest";
import { isResident } from "../../autoscaler/slot-arbiter.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import type { ReplicaEvent, Tier } from "../../lib/replica-event.ts";
import { chat, metricValue, sharedGpu, simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/**
 * Two members on one simulated 24 GiB GPU whose engines each take 90% of it:
 * if Snooze ever woke or started one while the other was awake, the simulated
 * GPU would fail that wake the way vLLM does, and the request would fail.
 */
async function startSlot(extraSlot = "", extraA: string[] = [], extraB: string[] = [], scale = 0.05) {
  const gpu = sharedGpu();
  snooze = await startWith(`
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
    ${extraSlot}
models:
  a:
    slot: gpu0
    command: ${simCommand([...gpu, ...extraA], scale)}
  b:
    slot: gpu0
    command: ${simCommand([...gpu, ...extraB], scale)}
`);
  const events: ReplicaEvent[] = [];
  const overlaps: string[] = [];
  const tiers = new Map<string, string>();
  snooze.autoscaler.watch((event) => {
    events.push(event);
    tiers.set(event.model, event.tier);
    const residents = [...tiers].filter(([, tier]) => isResident(tier as Tier)).map(([model]) => model);
    if (residents.length > 1) overlaps.push(residents.join("+"));
  });
  return { events, overlaps };
}

const ask = (model: string, extra: Record<string, unknown> = {}) =>
  fetch(`${snooze!.url}/v1/chat/completions`, chat(model, { max_tokens: 2, ...extra }));
const tierOf = (model: string) => snooze!.autoscaler.controller(model)!.tier;

describe("a slot: one resident at a time", () => {
  test("swaps in both directions, never two resident, the GPU never over-committed", async () => {
    const { overlaps } = await startSlot();
    for (const model of ["a", "b", "a", "b"]) {
      const response = await ask(model);
      expect(response.status, await response.clone().text()).toBe(200);
      expect(tierOf(model)).toBe("ready");
    }
    expect(overlaps).toEqual([]);
    expect(tierOf("a")).toBe("asleep-1");
    const metrics = await snooze!.registry.metrics();
    expect(metricValue(metrics, "snooze_slot_swaps_total", { slot: "gpu0", from: "a", to: "b" })).toBe(2);
    expect(metricValue(metrics, "snooze_slot_swaps_total", { slot: "gpu0", from: "b", to: "a" })).toBe(1);
    const slots = ((await (await fetch(`${snooze!.url}/snooze/v1/slots`)).json()) as any).slots;
    expect(slots[0]).toMatchObject({ name: "gpu0", policy: "sticky", resident: "b", swaps: 3, waiting: [] });
  });

  test("concurrent requests for the waiting member coalesce onto one swap", async () => {
    const { overlaps } = await startSlot();
    expect((await ask("a")).status).toBe(200);
    const statuses = await Promise.all(Array.from({ length: 20 }, () => ask("b").then((r) => r.status)));
    expect(statuses.every((s) => s === 200)).toBe(true);
    const metrics = await snooze!.registry.metrics();
    expect(metricValue(metrics, "snooze_slot_swaps_total", { slot: "gpu0" })).toBe(1);
    expect(metricValue(metrics, "snooze_coalesced_requests_total", { model: "b" })).toBeGreaterThanOrEqual(
      19,
    );
    expect(overlaps).toEqual([]);
  });
});

describe("the simulated GPU that makes the slot invariant observable", () => {
  test("without a slot, the second engine on the same GPU fails to start (so the slot tests above can fail)", async () => {
    const gpu = sharedGpu();
    snooze = await startWith(`
models:
  a:
    command: ${simCommand(gpu)}
  b:
    command: ${simCommand(gpu)}
`);
    expect((await ask("a")).status).toBe(200);
    const second = await ask("b");
    expect(second.status).toBe(503);
    expect(((await second.json()) as any).error.message).toMatch(/memory/i);
  });
});

describe("a slot whose incumbent cannot sleep", () => {
  test("a failed sleep stops the incumbent, then the target gets the GPU", async () => {
    const { overlaps } = await startSlot();
    expect((await ask("a")).status).toBe(200);
    const aAddress = snooze!.autoscaler.controller("a")!.state().address!;
    await fetch(`http://${aAddress}/sim/faults`, { method: "POST", body: JSON.stringify({ sleepFail: 1 }) });
    expect((await ask("b")).status).toBe(200);
    expect(tierOf("a")).toBe("cold");
    expect(overlaps).toEqual([]);
    expect((await ask("a")).status).toBe(200); // and a can come back (a cold start)
  });
});

describe("a slot whose incumbent streams past drainTimeout", () => {
  test("the stream is ended at the drain's end with an SSE error event saying why; the incumbent sleeps (not stopped) and the target is answered", async () => {
    // a's tokens come every 100 ms: a 1,000-token stream would run for 100 s.
    const { overlaps } = await startSlot("maxWait: 0s\n    drainTimeout: 1s", ["--itl", "2s"]);
    const stream = await ask("a", { stream: true, max_tokens: 1_000, ignore_eos: true });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    await reader.read(); // the stream runs
    const other = await ask("b");
    expect(other.status, await other.clone().text()).toBe(200);
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
      rest += new TextDecoder().decode(chunk.value);
    // The error event, then the end of the stream as an SSE client expects it.
    const events = rest.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.slice(-2)[0]).toMatch(/^data: \{"error":\{.*"code":"drain_timeout"/);
    expect(events.at(-1)).toBe("data: [DONE]");
    // Its engine saw the client go and slept: asleep, not stopped for a sleep that never came.
    expect(tierOf("a")).toBe("asleep-1");
    expect(overlaps).toEqual([]);
    expect((await ask("a")).status).toBe(200);
  });
});

describe("a slot whose incumbent's sleep call is slow", () => {
  test("a request held for the other member past its hold budget is told it waits for the resident's sleep, and to retry within 2 s: obeyed, it is served once the resident sleeps", async () => {
    // Found by a probe: it was told `retry in about 10s` (the member's own unmeasured start), with
    // no word of the slot, while the resident's sleep call may take 30 s or more. Then it was told
    // that call's timeout (2 m here) on top (found by a later probe): the swap it asked for was long
    // over when a client that obeyed came back, and a busy resident had taken the slot back.
    const gpu = sharedGpu();
    snooze = await startWith(`
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
models:
  a:
    slot: gpu0
    drainTimeout: 1s
    command: ${simCommand([...gpu, "--sleep-time-l1", "100s"])}
  b:
    slot: gpu0
    holdBudget: 3s
    command: ${simCommand(gpu)}
`);
    expect((await ask("a")).status).toBe(200);
    const refused = await ask("b");
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("hold_budget_exceeded");
    // a drained within its second, and its sleep call (5 s here) runs when b's budget is spent.
    expect(error.message).toMatch(
      /waits for its slot, as the slot `gpu0`'s resident `a` is still going to sleep/,
    );
    // a's sleep call is given its wakeTimeout (2m) before its engine is stopped: said, not told to wait.
    expect(error.message).toMatch(/its sleep call may take up to 2m|given up within 1m5\ds/);
    expect(refused.headers.get("retry-after")).toBe("2");
    expect(error.message).toContain("retry in about 2s");
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Held again: a's sleep (5 s here) ends within this hold budget, and b is served.
    const served = await ask("b");
    expect(served.status, await served.clone().text()).toBe(200);
  });
});

describe("a slot whose resident stays busy", () => {
  test("a request held past its hold budget is told it waits for the slot and to retry within 2 s; a client that obeys Retry-After is served once maxWait is reached", async () => {
    // Found by a probe: it was told `retry in about 10s` (its own unmeasured start), past the 5 s
    // pause that ends a member's wait for its slot, so each retry waited anew: with holdBudget under
    // maxWait, a client that obeyed Retry-After was never served while the resident stayed busy.
    const gpu = sharedGpu();
    snooze = await startWith(`
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
    maxWait: 4s
    drainTimeout: 500ms
models:
  a:
    slot: gpu0
    command: ${simCommand([...gpu, "--itl", "2s"])}
  b:
    slot: gpu0
    holdBudget: 3s
    command: ${simCommand(gpu)}
`);
    // a busy for as long as the test runs: its tokens come every 100 ms, 1,000 of them.
    const stream = await ask("a", { stream: true, max_tokens: 1_000, ignore_eos: true });
    expect(stream.status).toBe(200);
    const drained = stream.text();
    const refused = await ask("b");
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("hold_budget_exceeded");
    expect(error.message).toMatch(/waits for its slot, as the slot `gpu0`'s resident `a` \(ready\) keeps it/);
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBe(2);
    expect(error.message).toContain("retry in about 2s");
    await new Promise((resolve) => setTimeout(resolve, retryAfter * 1_000));
    // Its wait ran on across the pause: past maxWait, b takes the slot from the busy resident.
    const served = await ask("b");
    expect(served.status, await served.clone().text()).toBe(200);
    expect(await drained).toMatch(/drain_timeout/);
  });
});

describe("a slot whose incumbent drains for a swap", () => {
  test("a request for the incumbent held past its hold budget meanwhile is told it waits for its slot, given to the other member, and to retry within 2 s", async () => {
    // Found by a probe: it was told only that the model `did not become ready within its hold
    // budget` and the model's own wake estimate: nothing of the slot, and, for a model whose wake
    // or start is measured long, a Retry-After past the pause that ends its wait for the slot.
    const gpu = sharedGpu();
    snooze = await startWith(`
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
    maxWait: 0s
    drainTimeout: 5s
models:
  a:
    slot: gpu0
    holdBudget: 1s
    command: ${simCommand([...gpu, "--itl", "2s"])}
  b:
    slot: gpu0
    command: ${simCommand(gpu)}
`);
    expect((await ask("a")).status).toBe(200);
    // a streams (a token every 100 ms) when b is asked for: a drains for the swap.
    const stream = await ask("a", { stream: true, max_tokens: 1_000, ignore_eos: true });
    const drained = stream.text();
    const other = ask("b");
    await until(() => tierOf("a") === "draining", 5_000, "a draining");
    const refused = await ask("a");
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("hold_budget_exceeded");
    expect(error.message).toMatch(
      /waits for its slot, as its own engine drains to give the slot `gpu0` to `b`/,
    );
    expect(refused.headers.get("retry-after")).toBe("2");
    expect(error.message).toContain("retry in about 2s");
    expect((await other).status).toBe(200);
    expect(await drained).toMatch(/drain_timeout/);
  });
});

describe("a slot whose resident's start does not end", () => {
  test("a request for the other member held past its hold budget is told the start is not interrupted and when it is given up", async () => {
    // Found by a probe: past the slot's maxWait it was told that maxWait bounds its wait, while a
    // start is never interrupted and held the slot until its startTimeout.
    const gpu = sharedGpu();
    snooze = await startWith(`
slots:
  gpu0:
    maxWait: 1s
models:
  a:
    slot: gpu0
    holdBudget: 2s
    command: ${simCommand(gpu)}
  b:
    slot: gpu0
    startTimeout: 30s
    holdBudget: 1s
    command: ${simCommand([...gpu, "--fault-never-ready"])}
`);
    const starting = ask("b");
    await until(() => tierOf("b") === "starting", 5_000, "b starting");
    const refused = await ask("a");
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("hold_budget_exceeded");
    expect(error.message).toMatch(
      /the slot `gpu0`'s resident `b` \(starting\) keeps it until its start under way ends \(it is not interrupted, whatever the slot's maxWait; it is given up within 2\d(\.\d)?s\)/,
    );
    expect(refused.headers.get("retry-after")).toBe("2");
    expect((await starting).status).toBe(503);
  });
});
