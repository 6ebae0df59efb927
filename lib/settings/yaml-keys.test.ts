import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";
import { problemsOf } from "./testing.ts";

const engine = "command: [x, '${PORT}']";

describe("mapping keys", () => {
  test("a model key that is YAML null is named where it is written, saying to quote it", () => {
    // Found by an outside tester: `null:` and `~:` said `file:1:1: models."": a name may not be empty`.
    for (const written of ["null", "~", "Null"])
      expect(problemsOf(`models:\n  a:\n    ${engine}\n  ${written}:\n    ${engine}\n`), written).toEqual([
        {
          key: `models.${written}`,
          line: 4,
          column: 3,
          message: `the key \`${written}\` is YAML null, not a name: quote it (\`"${written}":\`) to use it as a name, or give a name`,
        },
      ]);
    expect(problemsOf(`models:\n  a:\n    ${engine}\n  : {${engine}}\n`)).toEqual([
      expect.objectContaining({
        key: 'models.""',
        line: 4,
        message: "the key is missing (YAML reads an empty key as null): give a name",
      }),
    ]);
    // Quoted, it is a name like any other.
    expect([...parseConfig(`models:\n  "null":\n    ${engine}\n`).models.keys()]).toEqual(["null"]);
  });

  test("a model id, slot name or env name that YAML reads as a number or boolean keeps its text, as aliases do", () => {
    // Found by an outside tester: `1.50:` became the model `1.5` while `aliases: [1.50]` kept `1.50`.
    const config = parseConfig(
      [
        "models:",
        "  1.50:",
        `    ${engine}`,
        "    aliases: [2.50]",
        "    slot: 0x10",
        "    env: {010: x}",
        "  123:",
        `    ${engine}`,
        "  true:",
        `    ${engine}`,
        "slots:",
        "  0x10: {}",
        "",
      ].join("\n"),
    );
    expect([...config.models.keys()].sort()).toEqual(["1.50", "123", "true"]);
    expect(config.names.get("2.50")).toBe("1.50");
    expect([...config.slots.keys()]).toEqual(["0x10"]);
    expect(config.models.get("1.50")).toMatchObject({ slot: "0x10", env: { "010": "x" } });
    // Problems with such a model are named and located by its key as written.
    expect(problemsOf("models:\n  1.50:\n    command: [x]\n")).toEqual([
      { key: 'models."1.50".command', line: 3, column: 5, message: expect.stringContaining("${PORT}") },
    ]);
  });

  test("a key set twice in one mapping is named by its path, at the repeat, also in defaults", () => {
    // Found by an outside tester: `(top level): invalid YAML: Map keys must be unique`.
    expect(problemsOf(`models:\n  qwen:\n    ${engine}\n    sleepAfter: 1m\n    sleepAfter: 2m\n`)).toEqual([
      {
        key: "models.qwen.sleepAfter",
        line: 5,
        column: 5,
        message: "is set twice in this mapping (first on line 4): keep one",
      },
    ]);
    expect(
      problemsOf(`defaults:\n  sleepAfter: 1m\n  'sleepAfter': 2m\nmodels:\n  qwen: {${engine}}\n`),
    ).toEqual([
      {
        key: "defaults.sleepAfter",
        line: 3,
        column: 3,
        message: "is set twice in this mapping (first on line 2): keep one",
      },
    ]);
    expect(problemsOf(`models:\n  qwen: {${engine}}\n  qwen: {${engine}}\n`)).toEqual([
      expect.objectContaining({ key: "models.qwen", line: 3, column: 3 }),
    ]);
  });
});
