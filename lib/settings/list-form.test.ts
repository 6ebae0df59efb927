import { expect, test } from "vitest";
import { parse } from "yaml";
import { listFormOf } from "./list-form.ts";

test("a command written as one text: the list it meant, as YAML that reads back as those words", () => {
  const cases: [string, string[]][] = [
    [
      "vllm serve Qwen/Qwen3-8B --port ${PORT} --enable-sleep-mode",
      ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "${PORT}", "--enable-sleep-mode"],
    ],
    [
      `vllm serve "my model" --served-model-name '\${MODEL}' --max-model-len 8192`,
      ["vllm", "serve", "my model", "--served-model-name", "${MODEL}", "--max-model-len", "8192"],
    ],
    [
      "x --flag true --other null --ratio 0.9 a\\ b",
      ["x", "--flag", "true", "--other", "null", "--ratio", "0.9", "a b"],
    ],
    ["qwen-chat", ["qwen-chat"]],
    // A shell's features: run by a shell.
    [
      "vllm serve m --port ${PORT} 2>&1 | tee log",
      ["sh", "-c", "vllm serve m --port ${PORT} 2>&1 | tee log"],
    ],
    ["HF_HOME=/x vllm serve m --port ${PORT}", ["sh", "-c", "HF_HOME=/x vllm serve m --port ${PORT}"]],
    ['vllm serve "m --port ${PORT}', ["sh", "-c", 'vllm serve "m --port ${PORT}']],
  ];
  for (const [text, words] of cases) expect(parse(listFormOf(text)), text).toEqual(words);
  expect(listFormOf("vllm serve m --port ${PORT}")).toBe('[vllm, serve, m, --port, "${PORT}"]');
});
