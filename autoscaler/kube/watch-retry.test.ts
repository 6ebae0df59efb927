import { describe, expect, it } from "vitest";
import { nextWatchRetryMs } from "./watch-retry.ts";

const limits = { firstMs: 200, maxMs: 5_000 };

describe("the pause before a follower watches the leader again", () => {
  it("is short after a watch that delivered, or the first time", () => {
    expect(nextWatchRetryMs(undefined, false, limits)).toBe(200);
    expect(nextWatchRetryMs(3_200, true, limits)).toBe(200);
  });

  it("doubles while the leader refuses, up to the most", () => {
    const pauses: number[] = [];
    let pause: number | undefined;
    for (let i = 0; i < 8; i++) {
      pause = nextWatchRetryMs(pause, false, limits);
      pauses.push(pause);
    }
    expect(pauses).toEqual([200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000]);
  });
});
