import { expect, test } from "vitest";
import { parseConfig } from "../lib/settings/index.ts";
import { ModelRoute, releaseWave } from "./model-route.ts";

const config = parseConfig("models:\n  qwen:\n    command: [x, '${PORT}']\n").models.get("qwen")!;
const listener = { demand() {}, loadChanged() {} };

test("progress lines: an estimate when the activation has one, the time waited when not", () => {
  const route = new ModelRoute(config, listener);
  const since = performance.now() - 3_000;
  expect(route.progress(since)).toMatch(/^waiting for qwen, 3(\.\d)?s so far$/);
  route.apply({ model: "qwen", replica: "qwen-1", tier: "starting", since: Date.now() });
  expect(route.progress(since)).toMatch(/^starting qwen, 3(\.\d)?s so far$/);
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "waking",
    since: Date.now(),
    estimateMs: 2_000,
  });
  expect(route.progress(since)).toMatch(/^waking qwen, ~(2|1\.\d)s$/);
  void route.close();
});

test("a model's tier is its most awake replica's, whatever order the events came in", async () => {
  const route = new ModelRoute(config, listener);
  const event = (replica: string, tier: "waking" | "asleep-1" | "ready" | "cold", port: number) =>
    route.apply({ model: "qwen", replica, address: `127.0.0.1:${port}`, tier, since: Date.now() });
  event("qwen-1", "waking", 1);
  event("qwen-2", "asleep-1", 2);
  expect(route.tier).toBe("waking");
  event("qwen-3", "ready", 3);
  expect(route.tier).toBe("ready");
  event("qwen-3", "cold", 3);
  event("qwen-1", "cold", 1);
  expect(route.tier).toBe("asleep-1");
  await route.close();
});

test("held requests leave in waves of releaseWave a turn, in arrival order, and newcomers queue behind them", async () => {
  const route = new ModelRoute(config, listener);
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "waking",
    since: Date.now(),
  });
  const order: number[] = [];
  const held = Array.from({ length: 2 * releaseWave + 3 }, (_, i) => {
    const hold = route.hold();
    void hold.promise.then(() => order.push(i));
    return hold;
  });
  route.apply({ model: "qwen", replica: "qwen-1", address: "127.0.0.1:1", tier: "ready", since: Date.now() });
  // Within this turn (microtasks and ticks included) only the first wave went.
  await new Promise((resolve) => process.nextTick(resolve));
  expect(order).toEqual(Array.from({ length: releaseWave }, (_, i) => i));
  // A request arriving now does not overtake the ones still held.
  expect(route.tryAcquire()).toBeUndefined();
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  expect(order).toEqual(held.map((_, i) => i));
  expect(route.held).toBe(0);
  expect(route.tryAcquire()).toBeDefined();
  await route.close(true);
});
