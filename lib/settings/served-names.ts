import { basename } from "node:path";
import { enablesSleepMode } from "../vllm-sleep-mode.ts";

/**
 * **Pure**: the names a vLLM command line serves its model as, or undefined when the command does
 * not say (it is not `vllm serve`, nor has a `--served-model-name`). vLLM serves the words after
 * `--served-model-name` (each up to the next flag; `--served-model-name=a` is one), else the model
 * it loads: `vllm serve <model>` or `--model <model>`. `${MODEL}` is the model's `id`.
 */
export function servedNames(command: readonly string[], id: string): string[] | undefined {
  const args = command.map((arg) => arg.replaceAll("${MODEL}", id));
  const names: string[] = [];
  let flagSeen = false;
  for (const [index, arg] of args.entries()) {
    if (arg.startsWith("--served-model-name=")) {
      flagSeen = true;
      names.push(arg.slice("--served-model-name=".length));
    } else if (arg === "--served-model-name") {
      flagSeen = true;
      for (const word of args.slice(index + 1)) {
        if (word.startsWith("-")) break;
        names.push(word);
      }
    }
  }
  if (flagSeen) return names;
  if (!isVllmServe(args)) return undefined;
  const modelFlag = args.findIndex((arg) => arg === "--model" || arg.startsWith("--model="));
  if (modelFlag >= 0) {
    const flag = args[modelFlag]!;
    return flag.includes("=")
      ? [flag.slice("--model=".length)]
      : args[modelFlag + 1]
        ? [args[modelFlag + 1]!]
        : undefined;
  }
  return args[2] && !args[2].startsWith("-") ? [args[2]] : undefined;
}

/** Whether `command` runs `vllm serve` itself (not through a shell or a container, which it cannot see into). */
export function isVllmServe(command: readonly string[]): boolean {
  return basename(command[0] ?? "") === "vllm" && command[1] === "serve";
}

/**
 * **Pure**: whether a `vllm serve` command line leaves sleep mode off: vLLM serves its sleep
 * endpoints only with `--enable-sleep-mode` (in any form vLLM reads it: lib/vllm-sleep-mode.ts). Not
 * said when a `--config` file may turn it on.
 */
export function vllmWithoutSleepMode(command: readonly string[]): boolean {
  return (
    isVllmServe(command) &&
    !command.some(enablesSleepMode) &&
    !command.some((arg) => arg === "--config" || arg.startsWith("--config="))
  );
}
