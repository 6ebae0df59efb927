import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

// GET /v1/models through `snooze serve` with sim engines: a listing hints at the recently used
// models that have a prewarm budget, a retrieval at the model it names; rate-limited.
let snooze: LocalSnooze;
beforeAll(async () => {
  const sleepy = `sleepAfter: 300ms\n    command: ${simCommand(["--enable-sleep-mode"])}`;
  snooze = await startWith(`
models:
  used:
    prewarmBudget: 10m
    ${sleepy}
  nobudget:
    ${sleepy}
  unused:
    prewarmBudget: 10m
    ${sleepy}
`);
});
afterAll(() => snooze.close(1_000));

const tierOf = (model: string) => snooze.autoscaler.controller(model)!.tier;
const tiers = () => ["used", "nobudget", "unused"].map(tierOf);

test("a listing wakes a recently used model with a budget (and keeps it awake a while); no other; not twice within the interval", {
  timeout: 40_000,
}, async () => {
  for (const model of ["used", "nobudget"]) {
    const answer = await fetch(`${snooze.url}/v1/chat/completions`, chat(model));
    expect(answer.status).toBe(200);
  }
  await until(
    () => tierOf("used") === "asleep-1" && tierOf("nobudget") === "asleep-1",
    15_000,
    "both asleep",
  );
  expect((await fetch(`${snooze.url}/v1/models`)).status).toBe(200);
  await until(() => tierOf("used") === "ready", 10_000, "used woken by the listing");
  // Well past its sleepAfter (300 ms) it stays awake for the request the listing announced.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(tiers()).toEqual(["ready", "asleep-1", "cold"]);
  expect(snooze.autoscaler.controller("used")!.state().learning!.prewarms.active?.kind).toBe("hint");
  // While the hint keeps it awake, the sleep planned is the one at its end (found by outside
  // testers: "sleeps now" for the whole prewarm, from the activator's own estimate; then none, "-").
  const { models } = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as any;
  const prewarmEnd = Date.parse(
    snooze.autoscaler.controller("used")!.state().learning!.prewarms.active!.until,
  );
  const next = models.find((m: { id: string }) => m.id === "used").nextChange;
  expect(next?.tier).toBe("asleep-1");
  expect(Math.abs(Date.parse(next.at) - prewarmEnd)).toBeLessThan(1_000);
  expect(Date.parse(next.at)).toBeGreaterThan(Date.now());
  // The request comes (a hit) and the model sleeps sleepAfter later; listed again at once: no
  // second hint within the interval.
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("used"))).status).toBe(200);
  await until(() => tierOf("used") === "asleep-1", 10_000, "used asleep again");
  for (let i = 0; i < 5; i++) expect((await fetch(`${snooze.url}/v1/models`)).status).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(tiers()).toEqual(["asleep-1", "asleep-1", "cold"]);
});

test("a HEAD of a listing or of a model answers as the GET would, without a body, and hints nothing", {
  timeout: 20_000,
}, async () => {
  for (const path of ["/v1/models", "/v1/models/unused", "/snooze/v1/models"]) {
    const head = await fetch(`${snooze.url}${path}`, { method: "HEAD" });
    expect([path, head.status, head.headers.get("content-type")]).toEqual([path, 200, "application/json"]);
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(0);
    expect(await head.text()).toBe("");
  }
  // Well past a hint's start: the model the HEAD named is still cold.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(tierOf("unused")).toBe("cold");
  expect(tierOf("used")).toBe("asleep-1");
});

test("retrieving one model by name hints at that one, even unused; a model without a budget is not woken", {
  timeout: 40_000,
}, async () => {
  expect((await fetch(`${snooze.url}/v1/models/nobudget`)).status).toBe(200);
  expect((await fetch(`${snooze.url}/v1/models/unused`)).status).toBe(200);
  await until(() => tierOf("unused") === "ready", 15_000, "unused started by the retrieval");
  expect(tierOf("nobudget")).toBe("asleep-1");
});

test("a hint refused because a person stopped the model does not use up its allowance", {
  timeout: 40_000,
}, async () => {
  // Found by an outside tester: after the stop was lifted, the model could not be hinted for 10 minutes.
  const own = await startWith(`
models:
  p:
    prewarmBudget: 10m
    sleepAfter: 300ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
  try {
    const tier = () => own.autoscaler.controller("p")!.tier;
    expect((await fetch(`${own.url}/v1/chat/completions`, chat("p"))).status).toBe(200);
    await own.autoscaler.controller("p")!.stopNow();
    expect((await fetch(`${own.url}/v1/models/p`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(tier()).toBe("cold");
    // A request lifts the stop; idle, the model sleeps; a retrieval now hints at it.
    expect((await fetch(`${own.url}/v1/chat/completions`, chat("p"))).status).toBe(200);
    await until(() => tier() === "asleep-1", 10_000, "p asleep");
    expect((await fetch(`${own.url}/v1/models/p`)).status).toBe(200);
    await until(() => tier() === "ready", 10_000, "p woken by the retrieval");
  } finally {
    await own.close(1_000);
  }
});

test("a listing or a retrieval during the shutdown hints nothing: no engine is started to be stopped", {
  timeout: 40_000,
}, async () => {
  // Found by a probe: as the admin API's wake did, a hint started a model's engine during the shutdown.
  const own = await startWith(`
models:
  busy:
    command: ${simCommand(["--itl", "100ms"], 1)}
  p:
    prewarmBudget: 10m
    command: ${simCommand(["--load-time", "100ms"], 1)}
`);
  const stream = await fetch(`${own.url}/v1/chat/completions`, {
    ...chat("busy", { stream: true, max_tokens: 20, ignore_eos: true }),
    signal: AbortSignal.timeout(20_000),
  });
  const closing = own.close(10_000);
  await fetch(`${own.url}/v1/models/p`);
  await fetch(`${own.url}/v1/models`);
  // The stream (2 s) holds the shutdown up: a hinted start (100 ms) would be listed by its end.
  expect(await stream.text()).toContain("[DONE]");
  expect(own.platform.replicaSet("p")?.replicas ?? []).toEqual([]);
  await closing;
});
