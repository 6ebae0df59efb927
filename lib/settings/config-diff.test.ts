import { describe, expect, test } from "vitest";
import { diffConfig, isEmptyDiff } from "./config-diff.ts";
import { parseConfig } from "./load.ts";

const base = `
slots:
  gpu0: { minResidency: 30s }
models:
  qwen:
    command: [vllm, serve, Qwen/Qwen3-8B, --port, "\${PORT}"]
    sleepAfter: 2m
  llama:
    command: [vllm, serve, meta-llama/Llama-3.1-8B, --port, "\${PORT}"]
    slot: gpu0
`;

const diffTo = (text: string) => diffConfig(parseConfig(base), parseConfig(text));

describe("diffConfig", () => {
  test("the same file, parsed again, changes nothing", () => {
    const diff = diffTo(base);
    expect(isEmptyDiff(diff)).toBe(true);
  });

  test("a model added and one removed", () => {
    const diff = diffTo(`
slots:
  gpu0: { minResidency: 30s }
models:
  qwen:
    command: [vllm, serve, Qwen/Qwen3-8B, --port, "\${PORT}"]
    sleepAfter: 2m
  mistral:
    command: [vllm, serve, mistral, --port, "\${PORT}"]
`);
    expect(diff.added.map((m) => m.id)).toEqual(["mistral"]);
    expect(diff.removed).toEqual(["llama"]);
    expect(diff.restarted).toEqual([]);
    expect(diff.updated).toEqual([]);
    expect(isEmptyDiff(diff)).toBe(false);
  });

  test("a changed command, env or port restarts the engine; the keys are named", () => {
    const diff = diffTo(
      base.replace("Qwen/Qwen3-8B", "Qwen/Qwen3-14B").replace("slot: gpu0", "slot: gpu0\n    env: { A: b }"),
    );
    expect(diff.restarted.map((c) => [c.config.id, c.keys])).toEqual([
      ["qwen", ["command"]],
      ["llama", ["env"]],
    ]);
    expect(diff.restarted[0]!.config.command).toContain("Qwen/Qwen3-14B");
    expect(diff.updated).toEqual([]);
  });

  test("turning sleep mode off or moving to another slot restarts the engine too", () => {
    const diff = diffTo(
      base.replace("sleepAfter: 2m", "sleepAfter: 2m\n    sleep: false").replace("slot: gpu0", ""),
    );
    expect(diff.restarted.map((c) => [c.config.id, c.keys])).toEqual([
      ["qwen", ["sleep"]],
      ["llama", ["slot"]],
    ]);
  });

  test("settings only: the engine keeps running, the changed keys are named", () => {
    const diff = diffTo(base.replace("sleepAfter: 2m", "sleepAfter: 30s\n    aliases: [q]"));
    expect(diff.restarted).toEqual([]);
    expect(diff.updated.map((c) => [c.config.id, c.keys])).toEqual([["qwen", ["aliases", "sleepAfter"]]]);
    expect(diff.updated[0]!.config.sleepAfter).toBe(30_000);
  });

  test("a value written out that equals the default still counts (the learned ladder keeps it)", () => {
    const diff = diffTo(base.replace("sleepAfter: 2m", "sleepAfter: 2m\n    sleepLevel: 1"));
    // Named as the file names it (found by an outside tester: the reload's log said "explicit").
    expect(diff.updated.map((c) => [c.config.id, c.keys])).toEqual([["qwen", ["sleepLevel"]]]);
  });

  test("defaults reach every model that does not set the key itself", () => {
    const diff = diffTo(`defaults: { concurrency: 4 }\n${base}`);
    expect(diff.updated.map((c) => [c.config.id, c.keys])).toEqual([
      ["qwen", ["concurrency"]],
      ["llama", ["concurrency"]],
    ]);
  });

  test("slot settings and top-level settings", () => {
    const diff = diffTo(
      `maxBodySize: 1Mi\neventSink: http://127.0.0.1:9/\n${base.replace("minResidency: 30s", "minResidency: 5s")}`,
    );
    expect(diff.slots.map((s) => [s.name, s.minResidency])).toEqual([["gpu0", 5_000]]);
    expect(diff.global).toEqual(["maxBodySize", "eventSink"]);
    expect(diff.updated).toEqual([]);
  });
});
