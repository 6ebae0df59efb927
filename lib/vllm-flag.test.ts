import { expect, test } from "vitest";
import {
  apiKeyFlag,
  configFlag,
  enablesSleepMode,
  hasVllmFlag,
  modelFlag,
  portFlag,
  servedModelNameFlag,
  vllmFlagValue,
  vllmFlagValues,
} from "./vllm-flag.ts";

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

test("one reader for every flag Snooze reads in an engine's command: --api-key in vLLM's spellings", () => {
  for (const command of [
    ["vllm", "serve", "m", "--api-key", "k"],
    ["vllm", "serve", "m", "--api_key", "k"],
    ["vllm", "serve", "m", "--api-k", "k"],
    ["vllm", "serve", "m", "--api-key=k"],
    ["vllm", "serve", "m", "--api_k=k"],
    ["sh", "-c", "exec vllm serve m --api_key k --port 8000"],
    // vLLM keeps the last.
    ["vllm", "serve", "m", "--api-key", "old", "--api-key", "k"],
  ])
    expect(vllmFlagValue(command, apiKeyFlag), command.join(" ")).toBe("k");
  for (const command of [
    ["vllm", "serve", "m", "--api", "k"],
    ["vllm", "serve", "m", "--api-keys", "k"],
    ["vllm", "serve", "m", "--api-key", "--port", "1"],
    ["vllm", "serve", "m", "--api-server-count", "2"],
    ["sh", "-c", 'exec vllm serve m --api-key "$KEY"'],
  ])
    expect(vllmFlagValue(command, apiKeyFlag), command.join(" ")).toBeUndefined();
});

test("a list flag takes the words up to the next flag; a value may look like a negative number", () => {
  expect(
    vllmFlagValues(
      ["vllm", "serve", "m", "--served_model_name", "a", "b", "--port", "1"],
      servedModelNameFlag,
    ),
  ).toEqual([["a", "b"]]);
  expect(vllmFlagValues(["vllm", "serve", "m", "--served-model=a"], servedModelNameFlag)).toEqual([["a"]]);
  expect(vllmFlagValue(["x", "--port", "-1"], portFlag)).toBe("-1");
  // Only whole where a shorter one is another flag's beginning.
  expect(hasVllmFlag(["vllm", "serve", "--config-format", "hf"], configFlag)).toBe(false);
  expect(hasVllmFlag(["vllm", "serve", "--config=c.yaml"], configFlag)).toBe(true);
  expect(vllmFlagValue(["vllm", "serve", "--model-impl", "vllm"], modelFlag)).toBeUndefined();
});
