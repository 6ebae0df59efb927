import { expect, test } from "vitest";
import { demotionsForBudget } from "./host-memory.ts";

test("within budget nobody is demoted", () => {
  expect(demotionsForBudget([{ model: "a", bytes: 10, since: 1 }], 10)).toEqual([]);
});

test("past the budget the longest asleep go first, until the rest fit", () => {
  const sleepers = [
    { model: "new", bytes: 10, since: 30 },
    { model: "old", bytes: 10, since: 10 },
    { model: "mid", bytes: 10, since: 20 },
  ];
  expect(demotionsForBudget(sleepers, 15)).toEqual(["old", "mid"]);
  expect(demotionsForBudget(sleepers, 25)).toEqual(["old"]);
});
