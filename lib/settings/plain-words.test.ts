import { describe, expect, test } from "vitest";
import { z } from "zod";
import { inPlainWords } from "./plain-words.ts";
import { problemsOf, withModel } from "./testing.ts";

describe("zod's issues in plain words", () => {
  test("a number out of range, an empty name and an infinite number say what to write, naming the value as written", () => {
    // Found by an outside tester: zod's own words (`Too big: expected int to be <=9007199254740991,
    // not 1e+23`, `Too small: expected string to have >=1 characters`) and `not Infinity`.
    expect(
      problemsOf(withModel("concurrency: 99999999999999999999999\nslot: ''\nqueueDepth: 1e400")),
    ).toEqual([
      {
        key: "models.qwen.concurrency",
        line: 4,
        column: 5,
        message: "expected an integer from 0 to 100000, not 99999999999999999999999",
      },
      { key: "models.qwen.slot", line: 5, column: 5, message: 'may not be empty, not ""' },
      {
        key: "models.qwen.queueDepth",
        line: 6,
        column: 5,
        message: "expected an integer from 1 to 1000000, not 1e400",
      },
    ]);
    expect(problemsOf(`slots:\n  "": {}\n${withModel("")}`)).toEqual([
      { key: 'slots.""', line: 2, column: 3, message: "a name may not be empty" },
    ]);
  });

  test("every kind of zod issue becomes a sentence, not zod's wording", () => {
    const schema = z.object({
      short: z.string().max(3),
      few: z.array(z.string()).max(1),
      five: z.number().multipleOf(5),
      mail: z.email(),
      kind: z.literal("a"),
      either: z.union([z.object({ a: z.string() }), z.object({ b: z.number() })]),
      names: z.record(z.string().regex(/^[a-z]+$/), z.string()),
      set: z.set(z.string()).min(1),
      checked: z.string().refine((s) => s === "ok"),
      closed: z.strictObject({ x: z.string() }),
      positive: z.number().positive(),
    });
    const parsed = schema.safeParse(
      {
        short: "long",
        few: ["a", "b"],
        five: 7,
        mail: "x",
        kind: "b",
        either: 3,
        names: { A: "x" },
        set: new Set(),
        checked: "no",
        closed: { x: "y", z: 1 },
        positive: -1,
      },
      { error: inPlainWords(schema) },
    );
    const messages = Object.fromEntries(parsed.error!.issues.map((i) => [i.path.join("."), i.message]));
    expect(messages).toEqual({
      short: "must be at most 3 characters long",
      few: "may have at most 1 entry",
      five: "must be a multiple of 5",
      mail: "expected an email address",
      kind: 'expected "a"',
      either: "expected a mapping",
      "names.A": "is not a valid name",
      set: "needs at least 1 entry",
      checked: "is not allowed here",
      closed: 'unknown key "z"',
      positive: "expected a number more than 0",
    });
    for (const message of Object.values(messages))
      expect(message).not.toMatch(/Too (big|small)|Invalid|[<>]=?\d/);
  });

  test("an unknown key suggests the known key at that level it most likely meant", () => {
    // Found by an outside tester: `sleepAftr` got no "did you mean `sleepAfter`?".
    expect(
      problemsOf(
        withModel(
          "sleepAftr: 1m\nsleep-level: 2\nwarmpu: true\nflavour: x",
          "defaults:\n  HoldBudget: 1m\nslots:\n  s: {polcy: fifo}\nmaxBodySise: 1Mi\n",
        ),
      ).map((p) => p.message),
    ).toEqual([
      'unknown key "HoldBudget"; did you mean "holdBudget"?',
      'unknown key "polcy"; did you mean "policy"?',
      'unknown key "maxBodySise"; did you mean "maxBodySize"?',
      'unknown key "sleepAftr"; did you mean "sleepAfter"?',
      'unknown key "sleep-level"; did you mean "sleepLevel"?',
      'unknown key "warmpu"; did you mean "warmup"?',
      'unknown key "flavour"',
    ]);
  });
  test("an unknown key that looks like a known one is spelled out, so the difference shows", () => {
    // Found by an outside tester: `unknown key "slееpAfter"; did you mean "sleepAfter"?` (two
    // Cyrillic е) read as a refusal of the very key suggested; a zero-width space did not show at all.
    expect(
      problemsOf(withModel("sl\u0435\u0435pAfter: 1m\nwarmup\u200b: true\nflavour: x", "gpu\u00e9: 1\n")).map(
        (p) => p.message,
      ),
    ).toEqual([
      'unknown key "gpu\\u{E9}" (a key of your own, such as an anchor to share, starts with "x-")',
      'unknown key "sl\\u{435}\\u{435}pAfter"; did you mean "sleepAfter"?',
      'unknown key "warmup\\u{200B}"; did you mean "warmup"?',
      'unknown key "flavour"',
    ]);
  });
});
