/**
 * Knative's cluster-wide autoscaling defaults, as far as a Snooze-class revision uses them: the
 * `config-autoscaler` ConfigMap in Knative's system namespace. Knative's KPA bounds every revision
 * by them where the revision's annotation is absent (a PodAutoscaler's scale bounds), and its
 * revision reconciler creates the Deployment with `initial-scale` pods; Snooze reads the same keys
 * so a Snooze-class revision is bounded as a KPA one would be (docs/knative.md).
 */
import { goDuration, goDurationMs } from "./go-duration.ts";

export const knativeSystemNamespace = "knative-serving";
export const autoscalerConfigMap = "config-autoscaler";

export interface KnativeDefaults {
  /** `min-scale`: pods every revision keeps unless its annotation says otherwise (0: none). */
  minScale: number;
  /** `max-scale`: pods at most unless the annotation says otherwise (0: no limit). */
  maxScale: number;
  /** `initial-scale`: pods a new revision starts with. */
  initialScale: number;
  /** `allow-zero-initial-scale`: whether a revision's `initial-scale: "0"` counts. */
  allowZeroInitialScale: boolean;
  /**
   * `stable-window`, when the ConfigMap sets it: what a revision's `window` annotation means when
   * it has none (`sleepAfter`). Knative's built-in 60 s is not taken for it: a cluster that says
   * nothing keeps Snooze's own default (a pod put to sleep after a minute would be woken, at a
   * cost, far more often than the KPA's pod it replaces was started).
   */
  stableWindow?: string;
  /**
   * `scale-to-zero-pod-retention-period`, when set: the `zeroAfter` of a revision without the
   * annotation. Both are written as the same value in an annotation is (`goDuration`), so the Model
   * reads alike whichever of the two set it.
   */
  retention?: string;
}

/** Knative's defaults when the ConfigMap does not set a key (or is absent). */
export const knativeDefaults: KnativeDefaults = Object.freeze({
  minScale: 0,
  maxScale: 0,
  initialScale: 1,
  allowZeroInitialScale: false,
});

/** Knative's bounds of a stable window (`autoscaling.WindowMin`, `WindowMax`). */
const windowMinMs = 6_000;
const windowMaxMs = 3_600_000;

/** A 32-bit integer as Go's strconv.ParseInt(text, 10, 32) reads it; undefined otherwise. */
function int32(text: string): number | undefined {
  if (!/^[+-]?\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n >= -(2 ** 31) && n <= 2 ** 31 - 1 ? n : undefined;
}

/** A boolean as Go's strconv.ParseBool reads it. */
function bool(text: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(text)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(text)) return false;
  return undefined;
}

/**
 * The defaults `config-autoscaler`'s data sets, validated as Knative validates these keys; a
 * problem when Knative would refuse the ConfigMap (its components then keep the config they had,
 * and so does Snooze). Keys Snooze does not use are not read.
 */
export function autoscalerDefaults(
  data: Record<string, string> | undefined,
): { defaults: KnativeDefaults; problem?: undefined } | { defaults?: undefined; problem: string } {
  const d = { ...knativeDefaults, maxScaleLimit: 0 };
  const ints = {
    "initial-scale": "initialScale",
    "min-scale": "minScale",
    "max-scale": "maxScale",
    "max-scale-limit": "maxScaleLimit",
  } as const;
  for (const [key, field] of Object.entries(ints)) {
    const raw = data?.[key];
    if (raw === undefined) continue;
    const n = int32(raw);
    if (n === undefined) return { problem: `${key}: ${JSON.stringify(raw)} is not a whole number` };
    d[field] = n;
  }
  const zero = data?.["allow-zero-initial-scale"];
  if (zero !== undefined) {
    const b = bool(zero);
    if (b === undefined)
      return { problem: `allow-zero-initial-scale: ${JSON.stringify(zero)} is not a boolean` };
    d.allowZeroInitialScale = b;
  }
  // Durations as Knative's config validates them (`autoscalerconfig.validate`).
  const window = data?.["stable-window"];
  if (window !== undefined) {
    const ms = goDurationMs(window);
    if (ms === undefined) return { problem: `stable-window: ${JSON.stringify(window)} is not a duration` };
    if (ms < windowMinMs || ms > windowMaxMs)
      return { problem: `stable-window = ${window}, must be in [6s; 1h0m0s] range` };
    if (ms % 1_000 !== 0)
      return { problem: `stable-window = ${window}, must be specified with at most second precision` };
    d.stableWindow = goDuration(window);
  }
  const retention = data?.["scale-to-zero-pod-retention-period"];
  if (retention !== undefined) {
    const ms = goDurationMs(retention);
    if (ms === undefined)
      return {
        problem: `scale-to-zero-pod-retention-period: ${JSON.stringify(retention)} is not a duration`,
      };
    if (ms < 0)
      return { problem: `scale-to-zero-pod-retention-period cannot be negative, was: ${retention}` };
    d.retention = goDuration(retention);
  }
  if (d.initialScale < 0 || (d.initialScale === 0 && !d.allowZeroInitialScale))
    return {
      problem: `initial-scale = ${d.initialScale}: at least 0 (at least 1 when allow-zero-initial-scale is false)`,
    };
  if (d.minScale < 0) return { problem: `min-scale = ${d.minScale}: at least 0` };
  if (d.maxScaleLimit < 0) return { problem: `max-scale-limit = ${d.maxScaleLimit}: at least 0` };
  if (d.maxScale < (d.maxScaleLimit > 0 ? 1 : 0) || (d.maxScaleLimit > 0 && d.maxScale > d.maxScaleLimit))
    return {
      problem: `max-scale = ${d.maxScale}: not within [0 or 1, max-scale-limit (${d.maxScaleLimit})]`,
    };
  if (d.maxScale > 0 && d.minScale > d.maxScale)
    return { problem: `min-scale (${d.minScale}) is more than max-scale (${d.maxScale})` };
  const { maxScaleLimit: _, ...defaults } = d;
  return { defaults };
}
