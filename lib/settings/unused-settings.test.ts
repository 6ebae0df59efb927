import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";

const model = (settings: string) => `models:\n  qwen:\n    command: [x, "\${PORT}"]\n${settings}`;

describe("settings that never take effect (warnings; the file stays valid)", () => {
  test("sleep-only settings on a model whose sleep is off, each at its line", () => {
    const config = parseConfig(model("    sleep: false\n    sleepLevel: 2\n    zeroAfter: 1h\n"), "s.yaml");
    expect(config.warnings).toEqual([
      "s.yaml:5:5: models.qwen.sleepLevel: never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
      "s.yaml:6:5: models.qwen.zeroAfter: never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
    ]);
  });

  test("a deeper sleep that never comes: zeroAfter first, or level 2 at once", () => {
    expect(parseConfig(model("    zeroAfter: 1h\n    deepSleepAfter: 3h\n"), "s.yaml").warnings).toEqual([
      "s.yaml:5:5: models.qwen.deepSleepAfter: never comes: the engine stops after 1h asleep (`zeroAfter`), before 3h asleep would take it to level 2 (`deepSleepAfter`)",
    ]);
    expect(parseConfig(model("    sleepLevel: 2\n    deepSleepAfter: 3h\n")).warnings?.[0]).toMatch(
      /models\.qwen\.deepSleepAfter: never applies: `sleepLevel` is 2/,
    );
  });

  test("none for the defaults' settings alone, for `never`, or for a ladder that works", () => {
    const fromDefaults = `defaults:\n  deepSleepAfter: 3h\n  zeroAfter: 1h\n  sleepLevel: 2\n${model("    sleep: false\n")}`;
    expect(parseConfig(fromDefaults).warnings).toBeUndefined();
    expect(parseConfig(model("    zeroAfter: never\n    deepSleepAfter: 3h\n")).warnings).toBeUndefined();
    expect(parseConfig(model("    zeroAfter: 4h\n    deepSleepAfter: 1h\n")).warnings).toBeUndefined();
  });

  test("a vLLM command that serves the model under another name than its id, which requests use", () => {
    // Found by an outside tester: `vllm serve Qwen/Qwen3-8B` for a model `qwen` loaded silently,
    // and each start ended, once the weights had loaded, in vLLM's 404 for the warm-up.
    // (`sleep: false`: the warning about --enable-sleep-mode has a test of its own.)
    const warned = (command: string) =>
      parseConfig(`models:\n  qwen:\n    command: ${command}\n    sleep: false\n`, "s.yaml").warnings ?? [];
    expect(warned('[vllm, serve, Qwen/Qwen3-8B, --port, "${PORT}"]')).toEqual([
      's.yaml:3:5: models.qwen.command: the engine serves the model as "Qwen/Qwen3-8B", but Snooze asks for it as "qwen" (its id), which vLLM answers with a 404: add --served-model-name "${MODEL}" (or rename the model)',
    ]);
    expect(
      warned('[/opt/venv/bin/vllm, serve, --model, Q/Q, --served-model-name, q1, q2, --port, "${PORT}"]'),
    ).toEqual([
      expect.stringContaining('the engine serves the model as "q1", "q2", but Snooze asks for it as "qwen"'),
    ]);
    expect(warned('[x, --served-model-name=other, "${PORT}"]')).toHaveLength(1);
    // Served under its id: nothing to say; nor for a command that is not vLLM's and names none.
    for (const command of [
      '[vllm, serve, Qwen/Qwen3-8B, --served-model-name, "${MODEL}", --port, "${PORT}"]',
      '[vllm, serve, Q/Q, --served-model-name, other, qwen, --port, "${PORT}"]',
      '[vllm, serve, qwen, --port, "${PORT}"]',
      '[vllm, serve, --model=qwen, --port, "${PORT}"]',
      '["${SNOOZE}", sim, --port, "${PORT}"]',
      '[llama-server, -m, model.gguf, --port, "${PORT}"]',
    ])
      expect({ command, warnings: warned(command) }).toEqual({ command, warnings: [] });
  });

  test("a `vllm serve` without --enable-sleep-mode for a model whose `sleep` is true", () => {
    // Found by an outside tester: it loaded silently, and each sleep failed and stopped the engine.
    const warned = (command: string, settings = "") =>
      parseConfig(`models:\n  qwen:\n    command: ${command}\n${settings}`, "s.yaml").warnings ?? [];
    expect(warned('[vllm, serve, Q/Q, --served-model-name, "${MODEL}", --port, "${PORT}"]')).toEqual([
      "s.yaml:3:5: models.qwen.command: `sleep` is true, but this `vllm serve` has no --enable-sleep-mode, without which vLLM serves no sleep endpoints: each sleep would fail and stop the engine instead; add --enable-sleep-mode, or set `sleep: false`",
    ]);
    const command = '[vllm, serve, Q/Q, --served-model-name, "${MODEL}", --port, "${PORT}"';
    expect(warned(`${command}]`, "    sleep: false\n")).toEqual([]);
    expect(warned(`${command}, --enable-sleep-mode]`)).toEqual([]);
    expect(warned(`${command}, --config, vllm.yaml]`)).toEqual([]);
  });

  test("a slot no model names: its settings govern nothing", () => {
    const file = (slotOfQwen: string) =>
      `slots:\n  gpu0:\n    policy: priority\n  gpu1: {}\nmodels:\n  qwen:\n    command: [x, "\${PORT}"]\n${slotOfQwen}`;
    expect(parseConfig(file("    slot: gpu0\n"), "s.yaml").warnings).toEqual([
      "s.yaml:4:3: slots.gpu1: no model names this slot in `slot:`, so its settings govern no model",
    ]);
    // A slot a model inherits from `defaults:` has that model as a member.
    expect(
      parseConfig(
        `defaults:\n  slot: gpu0\nslots:\n  gpu0: {}\nmodels:\n  qwen:\n    command: [x, "\${PORT}"]\n`,
      ).warnings,
    ).toBeUndefined();
  });
});
