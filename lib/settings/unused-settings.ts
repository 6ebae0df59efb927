import { formatDuration } from "../duration.ts";
import type { ModelConfig } from "./resolve.ts";

/** Written where `sleep` is false, these never apply: a replica goes from ready to cold. */
const sleepOnly = ["sleepLevel", "deepSleepAfter", "zeroAfter", "wakeTimeout"] as const;

/** A setting that never takes effect, and why. */
export interface UnusedSetting {
  key: string;
  message: string;
}

/**
 * **Pure**: the settings a model writes itself (`written`: its own mapping, a Model's spec, a
 * workload's annotations as settings) that can never take effect, given the settings it ends up
 * with (`model`). The model is still valid (it may be meant), so these are warnings: found by an
 * outside tester, for whom they loaded silently. A setting only inherited from `defaults:` is not
 * named, since it is written for many models.
 */
export function unusedSettings(
  written: object,
  model: Pick<ModelConfig, "sleep" | "sleepLevel" | "deepSleepAfter" | "zeroAfter">,
): UnusedSetting[] {
  const set = (key: string) => (written as Record<string, unknown>)[key] !== undefined;
  if (!model.sleep)
    return sleepOnly.filter(set).map((key) => ({
      key,
      message:
        "never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
    }));
  if (model.sleepLevel === 2)
    return set("deepSleepAfter")
      ? [
          {
            key: "deepSleepAfter",
            message: "never applies: `sleepLevel` is 2, so a replica sleeps at level 2 at once",
          },
        ]
      : [];
  const deepens = Number.isFinite(model.deepSleepAfter) && Number.isFinite(model.zeroAfter);
  if (deepens && model.zeroAfter <= model.deepSleepAfter && (set("deepSleepAfter") || set("zeroAfter")))
    return [
      {
        key: set("deepSleepAfter") ? "deepSleepAfter" : "zeroAfter",
        message: `never comes: the engine stops after ${formatDuration(model.zeroAfter)} asleep (\`zeroAfter\`), before ${formatDuration(model.deepSleepAfter)} asleep would take it to level 2 (\`deepSleepAfter\`)`,
      },
    ];
  return [];
}
