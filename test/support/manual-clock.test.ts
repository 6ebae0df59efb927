import { expect, test } from "vitest";
import { ManualClock } from "./manual-clock.ts";

test("advance runs due timers in time order, each at its own moment, ties in the order set", () => {
  const clock = new ManualClock(1_000);
  const ran: string[] = [];
  clock.setTimeout(() => ran.push(`b@${clock.now()}`), 20);
  clock.setTimeout(() => ran.push(`a@${clock.now()}`), 10);
  clock.setTimeout(() => ran.push(`a2@${clock.now()}`), 10);
  clock.setTimeout(() => ran.push(`late@${clock.now()}`), 31);
  clock.advance(30);
  expect(ran).toEqual(["a@1010", "a2@1010", "b@1020"]);
  expect(clock.now()).toBe(1_030);
  clock.advance(1);
  expect(ran.at(-1)).toBe("late@1031");
});

test("a timer set by a timer runs in the same advance when it falls within the window", () => {
  const clock = new ManualClock(0);
  const ran: number[] = [];
  const tick = () => {
    ran.push(clock.now());
    clock.setTimeout(tick, 100);
  };
  clock.setTimeout(tick, 100);
  clock.advance(350);
  expect(ran).toEqual([100, 200, 300]);
  expect(clock.nextAt()).toBe(400);
});

test("cancelled timers and timers of Infinity never run", () => {
  const clock = new ManualClock(0);
  let ran = 0;
  const timer = clock.setTimeout(() => ran++, 10);
  clock.setTimeout(() => ran++, Number.POSITIVE_INFINITY);
  timer.cancel();
  clock.advance(1e12);
  expect(ran).toBe(0);
  expect(clock.pending).toBe(0);
});

test("advanceAndSettle lets promise chains a timer starts run before the next timer", async () => {
  const clock = new ManualClock(0);
  const log: string[] = [];
  const wait = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  void (async () => {
    await wait(10);
    log.push(`first at ${clock.now()}`);
    await Promise.resolve();
    await wait(10);
    log.push(`second at ${clock.now()}`);
  })();
  clock.setTimeout(() => log.push(`timer at ${clock.now()}`), 15);
  await clock.advanceAndSettle(20);
  expect(log).toEqual(["first at 10", "timer at 15", "second at 20"]);
  expect(clock.now()).toBe(20);
});

test("advanceAndSettle with a step settles after every step", async () => {
  const clock = new ManualClock(0);
  const seen: number[] = [];
  await clock.advanceAndSettle(30, 10, () => seen.push(clock.now()));
  expect(seen).toEqual([0, 10, 20, 30]);
});
