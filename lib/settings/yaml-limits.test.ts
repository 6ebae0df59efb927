import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";
import { maxNesting } from "./nesting.ts";
import { problemsOf, withModel } from "./testing.ts";

describe("YAML the settings do not take", () => {
  test("a file nested thousands deep says it nests too deep, at the line, not a stack overflow", () => {
    // Found by an outside tester: `invalid YAML: Invalid regular expression … Stack overflow`, and
    // `Maximum call stack size exceeded` at column after column.
    const flow = withModel(`env: ${"[".repeat(3000)}${"]".repeat(3000)}`);
    const block = withModel(
      "",
      `defaults:\n${Array.from({ length: 3000 }, (_, i) => `${"  ".repeat(i + 1)}- `).join("\n")}x\n`,
    );
    for (const text of [flow, block]) {
      const problems = problemsOf(text);
      expect(problems).toEqual([
        {
          key: "",
          line: expect.any(Number),
          column: expect.any(Number),
          message: `the file nests lists and mappings more than ${maxNesting} deep here; settings need only a few levels, so take the extra ones out`,
        },
      ]);
    }
    // At the bracket one past the limit: three mappings hold `env`, whose first bracket is column 10.
    expect(problemsOf(flow)[0]).toMatchObject({ line: 4, column: 10 + (maxNesting - 3) });
    // As deep as the limit is fine as YAML (and then judged as settings).
    const deepest = `x-deep: ${"[".repeat(maxNesting - 1)}${"]".repeat(maxNesting - 1)}\n${withModel("")}`;
    expect(parseConfig(deepest).models.size).toBe(1);
  });

  test("a YAML tag other than the standard JSON-like ones is refused at its setting", () => {
    // Found by an outside tester: `sleepAfter: !duration 30s` was taken as `30s`, the tag ignored.
    expect(
      problemsOf(
        withModel("sleepAfter: !duration 30s\nenv: {A: !!binary aGk=}\nhostMemory: !!timestamp 2001-01-01"),
      ),
    ).toEqual([
      {
        key: "models.qwen.sleepAfter",
        line: 4,
        column: 5,
        message: "the YAML tag !duration is not understood here: remove it and write the value plainly",
      },
      {
        key: "models.qwen.env.A",
        line: 5,
        column: 11,
        message: "the YAML tag !!binary is not understood here: remove it and write the value plainly",
      },
      {
        key: "models.qwen.hostMemory",
        line: 6,
        column: 5,
        message: "the YAML tag !!timestamp is not understood here: remove it and write the value plainly",
      },
    ]);
    // The standard tags are a way to quote or to say the type, and are fine.
    expect(
      parseConfig(withModel("slot: !!str 5\npriority: !!int 3", "slots:\n  '5': !!map {}\n")).models.get(
        "qwen",
      ),
    ).toMatchObject({
      slot: "5",
      priority: 3,
    });
  });
  test("a key a million characters long, or tens of thousands of unknown keys, is refused at once", () => {
    // Found by an outside tester: each unknown key was compared, letter by letter, with every known
    // key to suggest the one meant, in a table of its length times theirs: one explicit key (`? s…`)
    // of a million characters took 27 s and 900 MB to be refused, 30,000 keys of some 25 letters 23 s.
    const long = "s".repeat(1_000_000);
    expect(problemsOf(withModel(`? ${long}\n: 1`))).toEqual([
      { key: `models.qwen.${long}`, line: 4, column: 7, message: `unknown key "${long}"` },
    ]);
    const many = Array.from({ length: 30_000 }, (_, i) => `${"v".repeat(3 + (i % 40))}z${i}: 1`);
    const problems = problemsOf(withModel(many.join("\n")));
    expect(problems).toHaveLength(many.length);
    expect(problems.at(-1)).toMatchObject({ line: 4 + many.length - 1, column: 5 });
    // A near key is still suggested, beside the long ones.
    expect(problemsOf(withModel(`? ${"x".repeat(5000)}\n: 1\nsleepAftr: 1m`)).map((p) => p.message)).toEqual([
      `unknown key "${"x".repeat(5000)}"`,
      'unknown key "sleepAftr"; did you mean "sleepAfter"?',
    ]);
  });
  test("a list of a hundred thousand items is read, or refused, at once", () => {
    // Found by an outside tester: every mapping, alias and tagged value was placed in its list by
    // searching the list for it, so 300,000 empty mappings (`[{}, {}, …]`, a file under 1 MiB that
    // loads) took 29 s, and 240,000 aliases 14 s to be refused (yaml-paths.test.ts has the search).
    const list = (item: string, count: number) =>
      `x-list: [${Array.from({ length: count }, () => item).join(",")}]\n`;
    expect(parseConfig(withModel("", list("{}", 100_000))).models.size).toBe(1);
    const missing = problemsOf(withModel("", list("*none", 100_000)));
    expect(missing).toHaveLength(100_000);
    expect(missing.at(-1)).toMatchObject({
      key: "x-list.99999",
      message: "the alias *none names no anchor (&none) before it",
    });
    expect(problemsOf(withModel("", `x-one: &one 1\n${list("*one", 100_000)}`))).toEqual([
      expect.objectContaining({ key: "x-list.100", message: expect.stringContaining("an alias bomb?") }),
    ]);
  });
});
