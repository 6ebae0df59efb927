import { formatDuration } from "../duration.ts";
import type { ModelConfig, ResolveProblem } from "./resolve.ts";

/** Written where `sleep` is false, these never apply: a replica goes from ready to cold. */
const sleepOnly = ["sleepLevel", "deepSleepAfter", "zeroAfter", "wakeTimeout"] as const;

/**
 * **Pure**: the settings written on model `id` itself (`written`, its own mapping) that can never
 * take effect, given the settings it ends up with (`model`). The file is still valid (such a file
 * may be meant), so these are warnings: found by an outside tester, for whom they loaded silently.
 * A setting only inherited from `defaults:` is not named, since it is written for many models.
 */
export function unusedSettings(id: string, written: object, model: ModelConfig): ResolveProblem[] {
  const set = (key: string) => (written as Record<string, unknown>)[key] !== undefined;
  const at = (key: string) => ["models", id, key];
  if (!model.sleep)
    return sleepOnly.filter(set).map((key) => ({
      path: at(key),
      message:
        "never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
    }));
  if (model.sleepLevel === 2)
    return set("deepSleepAfter")
      ? [
          {
            path: at("deepSleepAfter"),
            message: "never applies: `sleepLevel` is 2, so a replica sleeps at level 2 at once",
          },
        ]
      : [];
  const deepens = Number.isFinite(model.deepSleepAfter) && Number.isFinite(model.zeroAfter);
  if (deepens && model.zeroAfter <= model.deepSleepAfter && (set("deepSleepAfter") || set("zeroAfter")))
    return [
      {
        path: at(set("deepSleepAfter") ? "deepSleepAfter" : "zeroAfter"),
        message: `never comes: the engine stops after ${formatDuration(model.zeroAfter)} asleep (\`zeroAfter\`), before ${formatDuration(model.deepSleepAfter)} asleep would take it to level 2 (\`deepSleepAfter\`)`,
      },
    ];
  return [];
}
