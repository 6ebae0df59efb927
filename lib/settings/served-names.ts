import { basename } from "node:path";
import {
  configFlag,
  enableSleepModeFlag,
  hasVllmFlag,
  modelFlag,
  servedModelNameFlag,
  vllmFlagValues,
} from "../vllm-flag.ts";

/**
 * **Pure**: the names a vLLM command line serves its model as, or undefined when the command does
 * not say (it is not `vllm serve`, nor has a `--served-model-name`). vLLM serves the words after
 * `--served-model-name` (each up to the next flag; `--served-model-name=a` is one), else the model
 * it loads: `vllm serve <model>` or `--model <model>`. `${MODEL}` is the model's `id`.
 */
export function servedNames(command: readonly string[], id: string): string[] | undefined {
  const args = command.map((arg) => arg.replaceAll("${MODEL}", id));
  // Read as vLLM reads it (lib/vllm-flag.ts): `--served_model_name`, `--served-model=a`; the last wins.
  const named = vllmFlagValues(args, servedModelNameFlag);
  if (named.length > 0) return named.at(-1)!;
  if (!isVllmServe(args)) return undefined;
  const model = vllmFlagValues(args, modelFlag);
  if (model.length > 0) return model.at(-1)!.length > 0 ? model.at(-1)!.slice(0, 1) : undefined;
  return args[2] && !args[2].startsWith("-") ? [args[2]] : undefined;
}

/** Whether `command` runs `vllm serve` itself (not through a shell or a container, which it cannot see into). */
export function isVllmServe(command: readonly string[]): boolean {
  return basename(command[0] ?? "") === "vllm" && command[1] === "serve";
}

/**
 * **Pure**: whether a `vllm serve` command line leaves sleep mode off: vLLM serves its sleep
 * endpoints only with `--enable-sleep-mode` (in any form vLLM reads it: lib/vllm-flag.ts). Not
 * said when a `--config` file may turn it on.
 */
export function vllmWithoutSleepMode(command: readonly string[]): boolean {
  return (
    isVllmServe(command) && !hasVllmFlag(command, enableSleepModeFlag) && !hasVllmFlag(command, configFlag)
  );
}
