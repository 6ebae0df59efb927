import { queryObjects } from "node:v8";
import { expect, test } from "vitest";
import { backgroundTimer, clearBackgroundTimer } from "./background-timer.ts";
import { systemClock } from "./clock.ts";

/**
 * Node's timer lists are internal; a timer that is first in its list points at it (`_idlePrev`),
 * which gives their prototype, and `v8.queryObjects` counts the live ones.
 */
function timerLists(): number {
  const probe = setTimeout(() => {}, 987_654_321) as unknown as { _idlePrev: object };
  const prototype = Object.getPrototypeOf(probe._idlePrev);
  clearTimeout(probe as unknown as NodeJS.Timeout);
  return queryObjects(prototype.constructor, { format: "count" }) as number;
}

const armings = 2_000;

test("background timers re-armed at ever new delays leave no timer list behind", () => {
  const before = timerLists();
  for (let i = 0; i < armings; i++) clearBackgroundTimer(backgroundTimer(() => {}, 600_000 + i));
  for (let i = 0; i < armings; i++) systemClock.setTimeout(() => {}, 700_000 + i).cancel();
  expect(timerLists() - before).toBeLessThan(10);
});

test("the count sees the lists a plain unref'd timer leaves (what the helpers avoid)", () => {
  const before = timerLists();
  for (let i = 0; i < armings; i++) {
    const timer = setTimeout(() => {}, 800_000 + i);
    timer.unref();
    clearTimeout(timer);
  }
  expect(timerLists() - before).toBeGreaterThanOrEqual(armings);
});

test("a background timer does not keep the process alive, and still fires", async () => {
  const fired = await new Promise<boolean>((resolve) => {
    const timer = backgroundTimer(() => resolve(true), 5);
    expect(timer.hasRef()).toBe(false);
  });
  expect(fired).toBe(true);
});
