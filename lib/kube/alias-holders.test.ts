import { describe, expect, test } from "vitest";
import { type AliasClaimant, assignAliases } from "./alias-holders.ts";

const model = (key: string, id: string, aliases: string[], precedence: string): AliasClaimant => ({
  key,
  id,
  aliases,
  precedence,
});

describe("assignAliases", () => {
  test("of two Models listing one alias, the older gets it, in whichever order they come", () => {
    const older = model("a/old", "x", ["q", "shared"], "2026-01-01T00:00:00Z a old");
    const younger = model("a/new", "y", ["shared", "own"], "2026-01-02T00:00:00Z a new");
    for (const list of [
      [older, younger],
      [younger, older],
    ]) {
      const { kept, leftOut } = assignAliases(list);
      expect(kept.get("a/old")).toEqual(["q", "shared"]);
      expect(kept.get("a/new")).toEqual(["own"]);
      expect(leftOut.get("a/new")).toEqual([{ alias: "shared", holder: "a/old", asId: false }]);
      expect(leftOut.has("a/old")).toBe(false);
    }
  });

  test("a model id goes before an older Model's alias of that name", () => {
    const older = model("a/old", "x", ["y"], "2026-01-01T00:00:00Z a old");
    const younger = model("a/new", "y", [], "2026-01-02T00:00:00Z a new");
    const { kept, leftOut } = assignAliases([older, younger]);
    expect(kept.get("a/old")).toEqual([]);
    expect(leftOut.get("a/old")).toEqual([{ alias: "y", holder: "a/new", asId: true }]);
  });

  test("the holder gone, the next Model gets the alias; a Model whose id another serves gets none", () => {
    const younger = model("a/new", "y", ["shared"], "2026-01-02T00:00:00Z a new");
    const twin = model("a/twin", "y", ["twin-only"], "2026-01-03T00:00:00Z a twin");
    const { kept, leftOut } = assignAliases([younger, twin]);
    expect(kept.get("a/new")).toEqual(["shared"]);
    expect(kept.has("a/twin")).toBe(false);
    expect(leftOut.size).toBe(0);
  });
});
