import { describe, expect, it } from "vitest";
import { keepNewest } from "./keep-newest.ts";

describe("keepNewest", () => {
  it("drops the oldest entries past the bound", () => {
    const map = new Map<string, number>();
    for (let i = 0; i < 5; i++) keepNewest(map, `k${i}`, i, 3);
    expect([...map]).toEqual([
      ["k2", 2],
      ["k3", 3],
      ["k4", 4],
    ]);
  });

  it("moves a key set again to the newest end, so it outlives older ones", () => {
    const map = new Map<string, number>();
    keepNewest(map, "a", 1, 2);
    keepNewest(map, "b", 2, 2);
    keepNewest(map, "a", 3, 2);
    keepNewest(map, "c", 4, 2);
    expect([...map]).toEqual([
      ["a", 3],
      ["c", 4],
    ]);
  });
});
