import { describe, expect, test } from "vitest";
import {
  type HintCandidate,
  hintIntervalMs,
  hintRecentMs,
  hintsPerInterval,
  hintsPerListing,
  ListingHints,
  listingHints,
} from "./listing-hint.ts";

const now = Date.UTC(2025, 0, 6, 9);
const minute = 60_000;
const model = (id: string, patch: Partial<HintCandidate> = {}): HintCandidate => ({
  id,
  tier: "asleep-1",
  lastActive: now - 5 * minute,
  prewarmBudget: 10 * minute,
  ...patch,
});

describe("listingHints", () => {
  test("a listing hints at the most recently used sleepers and cold models with a budget, at most two", () => {
    const models = [
      model("a", { lastActive: now - 30 * minute }),
      model("b", { lastActive: now - minute, tier: "cold" }),
      model("c", { lastActive: now - 2 * minute, tier: "asleep-2" }),
      model("d", { lastActive: now - 10 * minute }),
    ];
    expect(hintsPerListing).toBe(2);
    expect(listingHints({ now, models, hinted: new Map() })).toEqual(["b", "c"]);
  });

  test("not a model that is awake or on its way, has no budget, or was not used recently (or ever)", () => {
    const models = [
      model("ready", { tier: "ready" }),
      model("waking", { tier: "waking" }),
      model("starting", { tier: "starting" }),
      model("nobudget", { prewarmBudget: 0 }),
      model("old", { lastActive: now - hintRecentMs }),
      model("never", { lastActive: undefined }),
    ];
    expect(listingHints({ now, models, hinted: new Map() })).toEqual([]);
  });

  test("a retrieval hints at the model it names, used or not, with the same limits", () => {
    const models = [
      model("a"),
      model("never", { lastActive: undefined }),
      model("nobudget", { prewarmBudget: 0 }),
    ];
    expect(listingHints({ now, models, hinted: new Map(), named: "never" })).toEqual(["never"]);
    expect(listingHints({ now, models, hinted: new Map(), named: "nobudget" })).toEqual([]);
    expect(listingHints({ now, models, hinted: new Map([["never", now - minute]]), named: "never" })).toEqual(
      [],
    );
  });

  test("each model once per interval, and no more than four in all per interval", () => {
    const models = ["a", "b", "c", "d", "e", "f"].map((id, i) => model(id, { lastActive: now - i * minute }));
    expect(listingHints({ now, models, hinted: new Map([["a", now - minute]]) })).toEqual(["b", "c"]);
    expect(listingHints({ now, models, hinted: new Map([["a", now - hintIntervalMs]]) })).toEqual(["a", "b"]);
    const full = new Map(["x", "y", "z"].map((id) => [id, now - minute]));
    expect(hintsPerInterval).toBe(4);
    expect(listingHints({ now, models, hinted: full })).toEqual(["a"]);
    full.set("w", now - minute);
    expect(listingHints({ now, models, hinted: full })).toEqual([]);
  });
});

describe("ListingHints", () => {
  test("a client polling the list every second wakes four models in ten minutes, then the next ones", () => {
    const hints = new ListingHints();
    const models = ["a", "b", "c", "d", "e", "f"].map((id, i) => model(id, { lastActive: now - i * minute }));
    const given: string[] = [];
    for (let t = now; t < now + hintIntervalMs; t += 1_000) given.push(...hints.take(t, models));
    expect(given).toEqual(["a", "b", "c", "d"]);
    // The interval over, the first ones can be hinted again (they are still asleep here).
    expect(hints.take(now + hintIntervalMs, models)).toEqual(["a", "b"]);
  });
});
