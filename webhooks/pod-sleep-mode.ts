import { annotationFor } from "../lib/settings/index.ts";
import { enablesSleepMode } from "../lib/vllm-flag.ts";
import type { JsonPatch } from "./json-patch.ts";
import { pointer } from "./json-patch.ts";
import {
  deviceOverrideWarning,
  gpuRequestWarning,
  noEngineContainerWarning,
  shellCommandWarning,
} from "./messages.ts";
import { annotationsOf, at, isObject } from "./object-path.ts";

export const sleepAnnotation = annotationFor("sleep");

/**
 * What a slot member's pod needs for vLLM sleep mode, pure and idempotent (a second pass changes
 * nothing): `--enable-sleep-mode` on the vLLM container when it lacks it, `VLLM_SERVER_DEV_MODE=1`
 * (vLLM serves /sleep and /wake_up only with both), and the slot's accelerator binding: the device
 * the Slot names as NVIDIA_VISIBLE_DEVICES, so every member runs on that one GPU.
 */
export interface PodSlot {
  slot: string;
  /** The Slot's spec.device, when the Slot exists and names one. */
  device?: string;
}

export const sleepModeFlag = "--enable-sleep-mode";
export const devModeEnv = "VLLM_SERVER_DEV_MODE";
export const deviceEnv = "NVIDIA_VISIBLE_DEVICES";

const shells = new Set(["sh", "bash", "ash", "dash", "zsh"]);

type Container = Record<string, unknown>;

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

/** A container that runs vLLM: its image or its command line names vllm. */
export function isVllmContainer(container: Container): boolean {
  if (typeof container.image === "string" && /vllm/i.test(container.image)) return true;
  return [...strings(container.command), ...strings(container.args)].some(
    (token) =>
      /(^|\/)vllm$/.test(token) || token.includes("vllm.entrypoints") || /\bvllm serve\b/.test(token),
  );
}

/**
 * Whether the model a workload serves uses sleep mode: not when the workload's annotation or a
 * Model serving it says `sleep: false`. Its pods learn it from their template (replica-pinning.ts).
 */
export function workloadSleeps(workload: unknown, models: unknown[]): boolean {
  if (annotationsOf(workload)[sleepAnnotation]?.trim() === "false") return false;
  return !models.some((model) => at(model, "spec", "sleep") === false);
}

export function mutatePod(pod: unknown, { slot, device }: PodSlot): { patch: JsonPatch; warnings: string[] } {
  const patch: JsonPatch = [];
  const warnings: string[] = [];
  // A model without sleep support (snooze.dev/sleep: "false") only goes ready <-> cold.
  if (annotationsOf(pod)[sleepAnnotation] === "false") return { patch, warnings };
  const containers = at(pod, "spec", "containers");
  if (!Array.isArray(containers)) return { patch, warnings };
  let engines = containers.map((c, i) => [c, i] as const).filter(([c]) => isObject(c) && isVllmContainer(c));
  if (engines.length === 0 && containers.length === 1 && isObject(containers[0]))
    engines = [[containers[0], 0]];
  if (engines.length === 0) return { patch, warnings: [noEngineContainerWarning(slot)] };

  for (const [raw, index] of engines) {
    const container = raw as Container;
    const name = String(container.name ?? index);
    const command = strings(container.command);
    const args = strings(container.args);
    const hasFlag = [...command, ...args].some(enablesSleepMode);
    if (!hasFlag) {
      const shell = shells.has(command[0]?.split("/").at(-1) ?? "") && [...command, ...args].includes("-c");
      if (shell) warnings.push(shellCommandWarning(name));
      // No list to append to (absent, or a null or other value a client sent): `add` sets one.
      else if (!Array.isArray(container.args))
        patch.push({ op: "add", path: pointer("spec", "containers", index, "args"), value: [sleepModeFlag] });
      else
        patch.push({
          op: "add",
          path: pointer("spec", "containers", index, "args", "-"),
          value: sleepModeFlag,
        });
    }
    const env = Array.isArray(container.env) ? (container.env as unknown[]) : undefined;
    const wanted: [string, string][] = [[devModeEnv, "1"]];
    if (device !== undefined) wanted.push([deviceEnv, device]);
    const next = env ? [...env] : [];
    for (const [key, value] of wanted) {
      // A name may be written more than once (Kubernetes warns, and allows it) and the container
      // gets the last one: every entry of the name is set, in place, so none is left to win.
      const found = next.flatMap((e, i) => (isObject(e) && e.name === key ? [i] : []));
      if (found.length === 0) {
        next.push({ name: key, value });
        continue;
      }
      const differ = found.filter((i) => {
        const entry = next[i] as Record<string, unknown>;
        return entry.value !== value || entry.valueFrom !== undefined;
      });
      if (differ.length === 0) continue;
      const effective = next[found.at(-1)!] as Record<string, unknown>;
      if (key === deviceEnv && differ.includes(found.at(-1)!))
        warnings.push(
          deviceOverrideWarning(name, JSON.stringify(effective.value ?? "(from a reference)"), value),
        );
      for (const i of differ) next[i] = { name: key, value };
    }
    if (JSON.stringify(next) !== JSON.stringify(env ?? [])) {
      patch.push({
        op: env ? "replace" : "add",
        path: pointer("spec", "containers", index, "env"),
        value: next,
      });
    }
    const gpus =
      at(container, "resources", "limits", "nvidia.com/gpu") ??
      at(container, "resources", "requests", "nvidia.com/gpu");
    if (device !== undefined && gpus !== undefined) warnings.push(gpuRequestWarning(name, slot));
  }
  return { patch, warnings };
}
