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

  describe("the revisions of one Knative Configuration", () => {
    const revision = (name: string, generation: number, ready: boolean, created: string): AliasClaimant => ({
      key: `ml/${name}`,
      id: name,
      aliases: ["chat"],
      precedence: `${created} ml ${name}`,
      revision: { configuration: "ml/qwen", generation, ready },
    });
    const first = revision("qwen-00001", 1, true, "2026-03-01T10:00:00Z");
    const second = revision("qwen-00002", 2, false, "2026-03-01T11:00:00Z");

    test("a newer revision not ready yet: the alias stays with the ready one; once ready, it moves", () => {
      for (const list of [
        [first, second],
        [second, first],
      ]) {
        const before = assignAliases(list);
        expect(before.kept.get("ml/qwen-00001")).toEqual(["chat"]);
        expect(before.kept.get("ml/qwen-00002")).toEqual([]);
        expect(before.leftOut.get("ml/qwen-00002")).toEqual([
          { alias: "chat", holder: "ml/qwen-00001", asId: false, sameConfiguration: true },
        ]);
        const after = assignAliases(
          list.map((r) => (r === second ? { ...second, revision: { ...second.revision!, ready: true } } : r)),
        );
        expect(after.kept.get("ml/qwen-00002")).toEqual(["chat"]);
        expect(after.kept.get("ml/qwen-00001")).toEqual([]);
        expect(after.leftOut.get("ml/qwen-00001")?.[0]).toMatchObject({ holder: "ml/qwen-00002" });
      }
    });

    test("none ready yet (a new Service): the newest has it", () => {
      const { kept } = assignAliases([{ ...first, revision: { ...first.revision!, ready: false } }, second]);
      expect(kept.get("ml/qwen-00002")).toEqual(["chat"]);
    });

    test("against another Model listing the alias, the Configuration is as old as its oldest revision", () => {
      const other = model("ml/llama", "llama", ["chat"], "2026-03-01T10:30:00Z ml llama");
      const ready = { ...second, revision: { ...second.revision!, ready: true } };
      const { kept, leftOut } = assignAliases([other, ready, first]);
      expect(kept.get("ml/qwen-00002")).toEqual(["chat"]);
      expect(leftOut.get("ml/llama")).toEqual([{ alias: "chat", holder: "ml/qwen-00002", asId: false }]);
    });

    test("revisions of another Configuration of the same name in another namespace do not compete", () => {
      const elsewhere = {
        ...second,
        key: "dev/qwen-00002",
        revision: { ...second.revision!, configuration: "dev/qwen" },
      };
      const { kept } = assignAliases([first, elsewhere]);
      expect(kept.get("ml/qwen-00001")).toEqual(["chat"]);
      expect(kept.get("dev/qwen-00002")).toEqual([]);
    });
  });
});
