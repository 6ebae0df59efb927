import { expect, test } from "vitest";
import { ManualClock } from "../test/support/manual-clock.ts";
import { createLogger } from "./log.ts";
import { LogLimiter } from "./log-limit.ts";

const limit = { lines: 3, intervalMs: 60_000, kinds: 4 };

function logged(clock: ManualClock, options = limit) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger(
    { component: "test" },
    (line) => void lines.push(JSON.parse(line)),
    "info",
    new LogLimiter(clock, options),
  );
  return { log, lines };
}

test("a warning that floods is written its first lines an interval, then counted and told once the interval ends (found by an outside tester: a line per request)", () => {
  const clock = new ManualClock();
  const { log, lines } = logged(clock);
  for (let i = 0; i < 100; i++) log.warn("engine call failed", { model: "qwen", attempt: i });
  expect(lines.map((line) => line.attempt)).toEqual([0, 1, 2]);
  clock.advance(59_999);
  expect(lines).toHaveLength(3);
  clock.advance(1);
  expect(lines[3]).toMatchObject({
    level: "warn",
    msg: "engine call failed: 97 more suppressed",
    component: "test",
    model: "qwen",
    suppressed: 97,
    seconds: 60,
  });
  // The next interval starts with its first lines written again.
  log.warn("engine call failed", { model: "qwen", attempt: 100 });
  expect(lines[4]).toMatchObject({ msg: "engine call failed", attempt: 100 });
  expect(clock.pending).toBe(0);
});

test("kinds are the message and the model: one model's flood hides no other model's first line, nor another message", () => {
  const clock = new ManualClock();
  const { log, lines } = logged(clock);
  for (let i = 0; i < 10; i++) log.warn("engine call failed", { model: "a" });
  log.child({ model: "b" }).warn("engine call failed");
  log.error("engine call failed", { model: "a" });
  log.warn("hold budget spent", { model: "a" });
  expect(lines.map((line) => `${line.level} ${line.msg} ${line.model}`)).toEqual([
    "warn engine call failed a",
    "warn engine call failed a",
    "warn engine call failed a",
    "warn engine call failed b",
    "error engine call failed a",
    "warn hold budget spent a",
  ]);
});

test("info and debug lines are never held back", () => {
  const clock = new ManualClock();
  const { log, lines } = logged(clock);
  for (let i = 0; i < 20; i++) log.info("tier", { model: "a" });
  expect(lines).toHaveLength(20);
  expect(clock.pending).toBe(0);
});

test("lines written under the limit, with nothing held back, leave no summary", () => {
  const clock = new ManualClock();
  const { log, lines } = logged(clock);
  log.warn("once", { model: "a" });
  clock.advance(10 * 60_000);
  expect(lines.map((line) => line.msg)).toEqual(["once"]);
});

test("the kinds counted at once are bounded: past them, new kinds (model ids a client chose) share one count, and are told as many kinds", () => {
  const clock = new ManualClock();
  const { log, lines } = logged(clock, { lines: 1, intervalMs: 60_000, kinds: 2 });
  for (let i = 0; i < 50; i++) log.warn("unknown", { model: `m${i}` });
  // Two kinds of their own, and one shared by the other 48: its first line, then the count.
  expect(lines.map((line) => line.model)).toEqual(["m0", "m1", "m2"]);
  clock.advance(60_000);
  expect(lines[3]).toMatchObject({ msg: "log lines of many kinds: 47 suppressed", suppressed: 47 });
  expect(lines[3]?.model).toBeUndefined();
  // Once the intervals ended, a kind is counted on its own again.
  log.warn("unknown", { model: "m49" });
  expect(lines[4]).toMatchObject({ msg: "unknown", model: "m49" });
});

test("a summary is written when the interval ends though no further line came", () => {
  const clock = new ManualClock();
  const limiter = new LogLimiter(clock, limit);
  const told: number[] = [];
  for (let i = 0; i < 5; i++) limiter.admit("k", (n) => told.push(n));
  expect(told).toEqual([]);
  clock.advance(60_000);
  expect(told).toEqual([2]);
});
