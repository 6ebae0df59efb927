import { describe, expect, test } from "vitest";
import { ConfigError, parseConfig } from "./index.ts";

describe("wakeTarget, prewarmBudget and the record of explicit settings", () => {
  test("the settings the user wrote (model or defaults) are recorded; the learned ladder keeps them", () => {
    const config = parseConfig(
      `
defaults:
  sleepAfter: 2m
  wakeTarget: 3s
models:
  a:
    command: [x, "\${PORT}"]
    sleepLevel: 2
    prewarmBudget: 10m
  b:
    command: [x, "\${PORT}"]
`,
      "snooze.yaml",
    );
    const a = config.models.get("a")!;
    expect(a.explicit).toEqual(["prewarmBudget", "sleepAfter", "sleepLevel", "wakeTarget"]);
    expect(a).toMatchObject({ wakeTarget: 3_000, prewarmBudget: 600_000, sleepAfter: 120_000 });
    const b = config.models.get("b")!;
    expect(b.explicit).toEqual(["sleepAfter", "wakeTarget"]);
    expect(b.prewarmBudget).toBe(0);
  });

  test("unset: the fixed ladder and no prewarm", () => {
    const b = parseConfig(`models:\n  b:\n    command: [x, "\${PORT}"]\n`, "snooze.yaml").models.get("b")!;
    expect(b.wakeTarget).toBeUndefined();
    expect(b.prewarmBudget).toBe(0);
    expect(b.explicit).toEqual([]);
  });

  test("a wake target must end, and a budget is at most a day", () => {
    const problem = (setting: string) => {
      try {
        parseConfig(`models:\n  b:\n    command: [x, "\${PORT}"]\n    ${setting}\n`, "snooze.yaml");
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
      return "";
    };
    expect(problem("wakeTarget: never")).toMatch(/"never" cannot work here/);
    expect(problem(`wakeTarget: "0"`)).toMatch(/must be longer than 0/);
    expect(problem("prewarmBudget: 25h")).toMatch(/more than a day/);
    expect(problem(`prewarmBudget: "0"`)).toBe("");
  });
});
