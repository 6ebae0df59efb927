import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";
import { configurationReference } from "./reference.ts";
import { problemsOf, withModel } from "./testing.ts";

// Found by an outside tester; one test per finding.
describe("names, merge keys, aliases and x- keys as the docs say", () => {
  const cmd = "command: [x, '${PORT}']";

  test("a YAML boolean in aliases or slot is the name as written, as a number is", () => {
    const config = parseConfig(
      `slots:\n  true: {}\nmodels:\n  a: {${cmd}, slot: true, aliases: [false, 12]}\n`,
    );
    expect(config.models.get("a")).toMatchObject({ slot: "true", aliases: ["false", "12"] });
    expect(config.names.get("false")).toBe("a");
    expect(configurationReference()).toContain("`slot: true` names the slot `true`");
    // Elsewhere a boolean is still not text: a duration says so.
    expect(problemsOf(withModel("sleepAfter: true"))).toEqual([
      expect.objectContaining({
        key: "models.qwen.sleepAfter",
        message: expect.stringMatching(/, not true$/),
      }),
    ]);
  });

  test("a merge key written twice in one mapping is refused, as any repeated key", () => {
    expect(problemsOf(withModel("<<: {sleepAfter: 2m}\n<<: {sleepAfter: 3m}"))).toEqual([
      {
        key: "models.qwen.<<",
        line: 5,
        column: 5,
        message: expect.stringMatching(/^is set twice in this mapping \(first on line 4\).*<<: \[\*a, \*b\]/),
      },
    ]);
  });

  test("an alias with no anchor says so, at its key path and line", () => {
    const message = "the alias *nope names no anchor (&nope) before it";
    expect(problemsOf(withModel("sleepAfter: *nope"))).toEqual([
      { key: "models.qwen.sleepAfter", line: 4, column: 17, message },
    ]);
    expect(problemsOf(withModel("<<: *nope"))).toEqual([
      { key: "models.qwen.<<", line: 4, column: 9, message },
    ]);
    expect(problemsOf(withModel("<<: [*nope]"))).toEqual([
      { key: "models.qwen.<<.0", line: 4, column: 10, message },
    ]);
    // Used before its anchor is written: the same.
    expect(problemsOf(`models:\n  a: {${cmd}, sleepAfter: *late}\nx-late: &late 1m\n`)).toEqual([
      expect.objectContaining({
        key: "models.a.sleepAfter",
        line: 2,
        message: "the alias *late names no anchor (&late) before it",
      }),
    ]);
  });

  test("a mapping that merges itself, and an alias bomb, are named at the alias's key path", () => {
    expect(problemsOf(`models:\n  a: &self\n    ${cmd}\n    <<: *self\n`)).toEqual([
      {
        key: "models.a.<<",
        line: 4,
        column: 9,
        message: "a mapping cannot merge itself: *self names the mapping this `<<` is in",
      },
    ]);
    expect(problemsOf(`x-a: &a [*a]\n${withModel("")}`)).toEqual([
      expect.objectContaining({
        key: "x-a.0",
        line: 1,
        column: 10,
        message: expect.stringContaining("inside the anchor &a it names"),
      }),
    ]);
    const bomb = `a: &a 1\nb: &b [*a, *a]\nc: [${Array(33).fill("*b").join(", ")}]\n${withModel("")}`;
    expect(problemsOf(bomb)).toEqual([
      { key: "c.32", line: 3, column: 133, message: expect.stringContaining("expand to too much") },
    ]);
  });

  test("a mapping is called a mapping; an integer-valued !!float is an integer", () => {
    expect(problemsOf("models: [a]\n")).toEqual([
      expect.objectContaining({ key: "models", message: 'expected a mapping, not ["a"]' }),
    ]);
    expect(problemsOf(withModel("", "defaults: 5\n"))).toEqual([
      expect.objectContaining({ key: "defaults", message: "expected a mapping, not 5" }),
    ]);
    expect(problemsOf(withModel("env: [A]"))).toEqual([
      expect.objectContaining({ key: "models.qwen.env", message: 'expected a mapping, not ["A"]' }),
    ]);
    expect(parseConfig(withModel("queueDepth: !!float 5")).models.get("qwen")!.queueDepth).toBe(5);
    expect(parseConfig(withModel("queueDepth: !!float 5.0")).models.get("qwen")!.queueDepth).toBe(5);
    expect(parseConfig(withModel("queueDepth: !!int 7")).models.get("qwen")!.queueDepth).toBe(7);
    expect(problemsOf(withModel("queueDepth: !!float 5.5"))).toEqual([
      expect.objectContaining({
        key: "models.qwen.queueDepth",
        message: "expected an integer from 1 to 1000000, not 5.5",
      }),
    ]);
    expect(problemsOf(withModel("queueDepth: !!float lots"))).toEqual([
      expect.objectContaining({ key: "models.qwen.queueDepth", message: expect.stringContaining("!!float") }),
    ]);
  });

  test("a name with an invisible or control character is refused, naming it and where", () => {
    expect(problemsOf(`models:\n  qwen: {${cmd}}\n  "qwen\\u200b": {${cmd}}\n`)).toEqual([
      expect.objectContaining({
        key: 'models."qwen\\u{200B}"',
        line: 3,
        message: expect.stringContaining("U+200B (zero width space) at position 5"),
      }),
    ]);
    for (const [char, code] of [
      ["\\u200d", "U+200D"],
      ["\\ufeff", "U+FEFF"],
      ["\\x01", "U+0001"],
    ] as const)
      expect(problemsOf(`models:\n  "q${char}w": {${cmd}}\n`)).toEqual([
        expect.objectContaining({ message: expect.stringContaining(`${code}`) }),
      ]);
    expect(problemsOf(`slots:\n  "g\\u200b": {}\nmodels:\n  a: {${cmd}, aliases: ["b\\u2060"]}\n`)).toEqual([
      expect.objectContaining({ key: 'slots."g\\u{200B}"', message: expect.stringContaining("U+200B") }),
      expect.objectContaining({ key: "models.a.aliases.0", message: expect.stringContaining("U+2060") }),
    ]);
  });

  test("a name holding a lone surrogate (half of a UTF-16 pair, written as an escape) is refused", () => {
    // Found by an outside tester: `"b\ud800":` was served, but no engine could be told the name (a
    // command line carries it as U+FFFD), so every start ended in the engine's 404.
    expect(problemsOf(`models:\n  "b\\ud800": {${cmd}}\n  a: {${cmd}, aliases: ["x\\udc00"]}\n`)).toEqual([
      expect.objectContaining({
        line: 2,
        message: expect.stringContaining(
          "U+D800 (a lone surrogate: half of a UTF-16 pair, no character) at position 2",
        ),
      }),
      expect.objectContaining({ key: "models.a.aliases.0", message: expect.stringContaining("U+DC00") }),
    ]);
    // A pair is one character, taken.
    expect([...parseConfig(`models:\n  "b\\ud83d\\ude00": {${cmd}}\n`).models.keys()]).toEqual(["b😀"]);
  });

  test("what is inside a top-level x- key is not checked, unless an alias uses it", () => {
    const notes = "x-notes:\n  ~: 1\n  a: !weird 1\n  b: 1\n  b: 2\n  ? [k]\n  : v\n";
    expect(parseConfig(withModel("", notes)).models.size).toBe(1);
    // What YAML itself needs is still checked there: a merge key takes mappings.
    expect(problemsOf(withModel("", "x-a: {<<: 5}\n"))).toEqual([
      expect.objectContaining({
        key: "x-a.<<",
        line: 1,
        message: expect.stringContaining("a merge key takes a mapping"),
      }),
    ]);
    // Used by an alias, the anchored content is checked where it is written.
    expect(problemsOf(withModel("<<: *used", "x-base: &used\n  sleepAfter: !weird 1m\n"))).toEqual([
      expect.objectContaining({
        key: "x-base.sleepAfter",
        line: 2,
        message: expect.stringContaining("!weird"),
      }),
    ]);
    expect(problemsOf(withModel("<<: *used", "x-base: &used\n  zeroAfter: 1h\n  zeroAfter: 2h\n"))).toEqual([
      expect.objectContaining({
        key: "x-base.zeroAfter",
        line: 3,
        message: expect.stringContaining("set twice"),
      }),
    ]);
  });

  test("models keep the file's order, integer-like ids too", () => {
    const file = `models:\n${["zeta", "10", "alpha", "2"].map((id) => `  ${id}: {${cmd}}\n`).join("")}`;
    const config = parseConfig(file);
    expect([...config.models.keys()]).toEqual(["zeta", "10", "alpha", "2"]);
    const slots = parseConfig(`slots:\n  b: {}\n  1: {}\n${file}`);
    expect([...slots.slots.keys()]).toEqual(["b", "1"]);
  });
});
