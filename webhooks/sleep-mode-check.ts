import { configFlag, enableSleepModeFlag, hasVllmFlag } from "../lib/vllm-flag.ts";
import { type MemberRef, sleepModeMissingWarning } from "./messages.ts";
import { at, isObject } from "./object-path.ts";
import { devModeEnv, isVllmContainer, sleepModeFlag } from "./pod-sleep-mode.ts";

type Container = Record<string, unknown>;

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

/**
 * What the vLLM containers of a model workload's pod template lack for sleep mode: vLLM serves
 * `/sleep` and `/wake_up` only with `--enable-sleep-mode` and `VLLM_SERVER_DEV_MODE=1`, so each
 * sleep Snooze asks of such an engine fails and stops it instead, and every idle spell ends in a
 * cold start. Slot members' pods get both from the pod webhook; other workloads are their author's
 * to fix, so the workload webhook warns (as local mode warns of such a `vllm serve`). Only
 * containers that name vLLM are judged; what a `--config` file, an `envFrom` or a `valueFrom` may
 * set is taken as set.
 */
export function sleepModeWarnings(workload: MemberRef, object: unknown): string[] {
  const containers = at(object, "spec", "template", "spec", "containers");
  if (!Array.isArray(containers)) return [];
  const warnings: string[] = [];
  for (const [index, raw] of containers.entries()) {
    if (!isObject(raw) || !isVllmContainer(raw)) continue;
    const container = raw as Container;
    const line = [...strings(container.command), ...strings(container.args)];
    const configFile = hasVllmFlag(line, configFlag);
    const hasFlag = hasVllmFlag(line, enableSleepModeFlag);
    const env = Array.isArray(container.env) ? container.env.filter(isObject) : [];
    const devEntries = env.filter((e) => e.name === devModeEnv);
    const devMode =
      container.envFrom !== undefined ||
      (devEntries.length > 0 &&
        (devEntries.at(-1)!.value === "1" || devEntries.at(-1)!.valueFrom !== undefined));
    const missing = [
      ...(hasFlag || configFile ? [] : [sleepModeFlag]),
      ...(devMode ? [] : [`${devModeEnv}=1`]),
    ];
    if (missing.length > 0)
      warnings.push(sleepModeMissingWarning(workload, String(container.name ?? index), missing));
  }
  return warnings;
}
