import { expect, test } from "vitest";
import { waitGapMs } from "../lib/slot-line.ts";
import { nextStreak } from "./wait-streak.ts";

test("a member's wait runs from its first request while requests keep coming, each timed out and asked again", () => {
  let streak = nextStreak(undefined, 0, 0);
  expect(streak).toEqual({ since: 0, seen: 0 });
  // The first request timed out at its holdBudget (3 s); its retry came a second later.
  streak = nextStreak(streak, undefined, 3_000);
  streak = nextStreak(streak, 4_000, 4_000);
  expect(streak).toEqual({ since: 0, seen: 4_000 });
  // Held requests older than the streak's first (another activator's) move its start back.
  expect(nextStreak(streak, -1_000, 5_000)).toEqual({ since: -1_000, seen: 5_000 });
});

test("a pause longer than waitGapMs ends the wait: demand that comes back later waits anew", () => {
  const streak = nextStreak(undefined, 0, 1_000);
  expect(nextStreak(streak, undefined, 1_000 + waitGapMs)).toEqual(streak);
  expect(nextStreak(streak, undefined, 1_000 + waitGapMs + 1)).toBeUndefined();
  expect(nextStreak(streak, 1_000 + waitGapMs + 1, 1_000 + waitGapMs + 1)).toEqual({
    since: 1_000 + waitGapMs + 1,
    seen: 1_000 + waitGapMs + 1,
  });
});
