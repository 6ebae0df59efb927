import { describe, expect, test } from "vitest";
import { settingsFromAnnotations } from "./annotations.ts";
import { ConfigError } from "./config-error.ts";
import { parseConfig } from "./load.ts";

const minimal = `
defaults:
  sleepAfter: 2m
models:
  qwen:
    command: [vllm, serve, Qwen/Qwen3-8B, --port, "\${PORT}"]
    aliases: [qwen3]
    zeroAfter: never
  llama:
    command: [vllm, serve, meta-llama/Llama-3.1-8B, --port, "\${PORT}"]
    sleepAfter: 30s
    hostMemory: 16Gi
`;

function problemsOf(text: string) {
  try {
    parseConfig(text, "bad.yaml");
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
}

describe("parseConfig", () => {
  test("fills defaults: model over file defaults over built-ins", () => {
    const config = parseConfig(minimal);
    const qwen = config.models.get("qwen")!;
    const llama = config.models.get("llama")!;
    expect(qwen.sleepAfter).toBe(120_000);
    expect(qwen.zeroAfter).toBe(Number.POSITIVE_INFINITY);
    expect(qwen.holdBudget).toBe(300_000);
    expect(llama.sleepAfter).toBe(30_000);
    expect(llama.hostMemory).toBe(16 * 2 ** 30);
    expect(config.names.get("qwen3")).toBe("qwen");
  });

  test("a bad duration names line, column and key", () => {
    const problems = problemsOf("models:\n  qwen:\n    command: [x, '${PORT}']\n    sleepAfter: soon\n");
    expect(problems).toEqual([
      expect.objectContaining({
        key: "models.qwen.sleepAfter",
        line: 4,
        column: 5,
        message: expect.stringContaining("duration"),
      }),
    ]);
  });

  test("an unknown key is reported where it is written", () => {
    const problems = problemsOf("models:\n  qwen:\n    command: [x, '${PORT}']\n    sleepAftr: 5m\n");
    expect(problems[0]).toMatchObject({
      key: "models.qwen.sleepAftr",
      line: 4,
      message: 'unknown key "sleepAftr"',
    });
  });

  test("a missing command is required", () => {
    expect(problemsOf("models:\n  qwen:\n    sleepAfter: 5m\n")[0]).toMatchObject({
      key: "models.qwen.command",
      line: 2,
      message: "is required",
    });
  });

  test("invalid YAML points at the line", () => {
    const problems = problemsOf("models:\n  qwen: [unclosed\n");
    expect(problems[0]!.message).toMatch(/invalid YAML/);
    expect(problems[0]!.line).toBeGreaterThan(0);
  });

  test("colliding aliases, unknown slots and a command without a port", () => {
    const problems = problemsOf(
      "models:\n  a:\n    command: [x, '${PORT}']\n    aliases: [b]\n    slot: gpu0\n  b:\n    command: [x]\n",
    );
    expect(problems.map((p) => p.key).sort()).toEqual(["models.a.slot", "models.b", "models.b.command"]);
    expect(problems.find((p) => p.key === "models.a.slot")).toMatchObject({ line: 5 });
  });

  test("the message of the error has file:line:col: key: reason", () => {
    expect(() =>
      parseConfig("models:\n  qwen:\n    command: [x, '${PORT}']\n    sleepLevel: 3\n", "s.yaml"),
    ).toThrow(/^s\.yaml:4:5: models\.qwen\.sleepLevel: /);
  });

  test("an empty file asks for models", () => {
    expect(problemsOf("")[0]).toMatchObject({ key: "models", message: "is required" });
  });
});

describe("settingsFromAnnotations", () => {
  test("kebab-case annotations map to the same settings", () => {
    const { settings, problems } = settingsFromAnnotations({
      "snooze.dev/sleep-after": "30s",
      "snooze.dev/sleep-level": "2",
      "snooze.dev/warmup": "false",
      "snooze.dev/aliases": "a, b",
      "snooze.dev/tier": "ready",
      "other.io/x": "y",
    });
    expect(problems).toEqual([]);
    expect(settings).toEqual({ sleepAfter: 30_000, sleepLevel: 2, warmup: false, aliases: ["a", "b"] });
  });

  test("bad annotations name the annotation, the value and the allowed form", () => {
    const { settings, problems } = settingsFromAnnotations({
      "snooze.dev/sleep-after": "soon",
      "snooze.dev/slep-after": "5m",
    });
    expect(settings).toBeUndefined();
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          annotation: "snooze.dev/sleep-after",
          value: "soon",
          message: expect.stringContaining("30s"),
        }),
        expect.objectContaining({
          annotation: "snooze.dev/slep-after",
          message: expect.stringContaining("unknown"),
        }),
      ]),
    );
  });
});
