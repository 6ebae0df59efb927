import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";
import { configurationReference } from "./reference.ts";
import { problemsOf } from "./testing.ts";

describe("shared settings: merge keys and x- keys", () => {
  const shared = [
    "x-vllm: &vllm",
    "  command: [vllm, serve, --port, '${PORT}']",
    "  sleepAfter: 10m",
    "x-slow: &slow {wakeTimeout: 5m, sleepAfter: 1h}",
    "models:",
    "  qwen:",
    "    <<: *vllm",
    "    sleepAfter: 30s",
    "  llama:",
    "    <<: [*slow, *vllm]",
    "",
  ].join("\n");

  test("a merge key copies an anchored mapping's settings; the model's own and earlier sources win", () => {
    // Found by an outside tester: `<<: *base` said `unknown key "<<"`.
    const config = parseConfig(shared);
    expect(config.models.get("qwen")).toMatchObject({
      command: ["vllm", "serve", "--port", "${PORT}"],
      sleepAfter: 30_000,
    });
    expect(config.models.get("llama")).toMatchObject({ sleepAfter: 3_600_000, wakeTimeout: 300_000 });
    expect([...config.models.keys()]).toEqual(["qwen", "llama"]);
  });

  test("the documented example of sharing settings loads as it says", () => {
    const example = /```yaml\n(x-rarely-used:[^`]*)```/.exec(configurationReference())![1]!;
    expect(parseConfig(example).models.get("qwen")).toMatchObject({
      sleepAfter: 120_000,
      deepSleepAfter: 600_000,
      zeroAfter: 4 * 3_600_000,
      command: expect.arrayContaining(["vllm"]),
    });
  });

  test("top-level x- keys are the user's own and ignored; other unknown top-level keys say so", () => {
    expect(parseConfig(`x-anything: [1, {a: b}]\n${shared}`).models.size).toBe(2);
    expect(problemsOf("vllm: &v {sleepAfter: 1m}\nmodels:\n  a: {command: [x, '${PORT}']}\n")).toEqual([
      {
        key: "vllm",
        line: 1,
        column: 1,
        message: 'unknown key "vllm" (a key of your own, such as an anchor to share, starts with "x-")',
      },
    ]);
  });

  test("a bad merged setting is named for the model and located where the anchor writes it", () => {
    expect(
      problemsOf(
        "x-base: &base\n  sleepAfter: soon\nmodels:\n  a:\n    <<: *base\n    command: [x, '${PORT}']\n",
      ),
    ).toEqual([
      {
        key: "models.a.sleepAfter",
        line: 2,
        column: 3,
        message: 'expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never", not "soon"',
      },
    ]);
    // A merged YAML number where a setting is text is taken as written too.
    expect(
      parseConfig(
        "x-base: &base {sleepAfter: 0}\nmodels:\n  a: {<<: *base, command: [x, '${PORT}']}\n",
      ).models.get("a")!.sleepAfter,
    ).toBe(0);
  });

  test("a merge key that names no mapping is a located problem; a quoted << is a plain key", () => {
    expect(problemsOf("x-n: &n 5\nmodels:\n  a:\n    <<: *n\n    command: [x, '${PORT}']\n")).toEqual([
      {
        key: "models.a.<<",
        line: 4,
        column: 5,
        message: expect.stringMatching(/^a merge key takes a mapping or an alias of one/),
      },
    ]);
    expect(problemsOf("models:\n  a:\n    '<<': {sleepAfter: 1m}\n    command: [x, '${PORT}']\n")).toEqual([
      expect.objectContaining({ key: "models.a.<<", message: 'unknown key "<<"' }),
    ]);
  });

  test("merge keys count against the alias limit: a merge bomb is refused", () => {
    const levels = ["x-a: &a {sleepAfter: 1m}"];
    for (let i = 1; i < 6; i++) {
      const previous = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      levels.push(
        `x-${name}: &${name} {${Array.from({ length: 9 }, (_, k) => `k${k}: *${previous}`).join(", ")}}`,
      );
    }
    const started = performance.now();
    expect(problemsOf(`${levels.join("\n")}\nmodels:\n  q: {<<: *f, command: [x, '\${PORT}']}\n`)).toEqual([
      expect.objectContaining({ message: expect.stringContaining("the aliases (*name) expand to too much") }),
    ]);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
