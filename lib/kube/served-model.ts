import { modelFlag, servedModelNameFlag, vllmFlagValue } from "../vllm-flag.ts";

/**
 * **Pure**: the model name a vLLM container serves, read from its command and args the way vLLM
 * reads them: the first `--served-model-name` (vLLM answers to each listed name and reports the
 * first), else the model (`--model`, or the positional one after `serve`, or the image's first arg
 * when it does not start with `-`: the vllm-openai image's entrypoint is `vllm serve`). Undefined
 * when the container says neither (then the caller falls back to a name of its own).
 */
export function servedModelOf(
  container: { command?: string[]; args?: string[] } | undefined,
): string | undefined {
  const command = container?.command ?? [];
  const args = container?.args ?? [];
  const words = [...command, ...args];
  const named = vllmFlagValue(words, servedModelNameFlag)?.trim();
  if (named) return named;
  const model = vllmFlagValue(words, modelFlag)?.trim();
  if (model) return model;
  const serve = words.indexOf("serve");
  const positional = serve >= 0 ? words[serve + 1] : command.length === 0 ? args[0] : undefined;
  return positional && !positional.startsWith("-") ? positional : undefined;
}
