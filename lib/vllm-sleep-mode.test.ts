import { expect, test } from "vitest";
import { enablesSleepMode } from "./vllm-sleep-mode.ts";

test("--enable-sleep-mode as vLLM reads it: underscores, a value, shortened as argparse allows, inside a script", () => {
  for (const word of [
    "--enable-sleep-mode",
    "--enable_sleep_mode",
    "--enable-sleep_mode",
    "--enable-sleep-mode=true",
    "--enable-sleep",
    "--enable-sleep-mo",
    "--enable_sleep",
    "vllm serve Qwen/Qwen3-8B --enable-sleep --port 8000",
    "exec vllm serve m --enable_sleep_mode",
  ])
    expect(enablesSleepMode(word), word).toBe(true);
});

test("what is not it: another flag, its opposite, a longer word, one shortened too far to be sure", () => {
  for (const word of [
    "--no-enable-sleep-mode",
    "--enable-sleep-modes",
    "--enable-sleeper",
    "--enable-sl",
    "--enable-server-load-tracking",
    "enable-sleep-mode",
    "--served-model-name=--enable-sleepy",
  ])
    expect(enablesSleepMode(word), word).toBe(false);
});
