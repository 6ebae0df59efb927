import { percentile } from "../stats.ts";
import { type ReplayResult, tierTime } from "./replay.ts";
import type { WorldModel } from "./world.ts";

/**
 * What the benchmark reports for one policy, over the evaluation window (the days after the
 * first week, which every policy runs too but which the learning needs to see history first).
 *
 * A request **met a sleeping engine** when its model was asleep or waking when it arrived, or
 * draining and it had to wait; it **met a cold engine** when its model was cold or starting.
 * Added wait = time held in the activator before dispatch (a 503 counts at the hold budget).
 * Awake GPU-hours = time any replica of a model was starting, waking, ready or draining, summed.
 */
export interface PolicyResult {
  policy: string;
  requests: number;
  sleeping: number;
  cold: number;
  /** sleeping + cold. */
  hits: number;
  waitP50Ms: number;
  waitP95Ms: number;
  waitP99Ms: number;
  refused: number;
  awakeHours: number;
  /** `asleep`: staged starts that reached their sleep before a request came. */
  prewarms: { total: number; hit: number; wasted: number; asleep: number; hours: number };
  /** Per model: hits and awake hours, for the breakdowns. */
  byModel: Map<string, { hits: number; awakeHours: number; requests: number }>;
  /** The control plane's own GPU-seconds against the benchmark's (whole trace), as a check. */
  accountingError: number;
}

export type Kind = "job" | "session" | "tail";

export function kindOf(model: WorldModel): Kind {
  if (model.sources.every((s) => s.kind === "schedule")) return "job";
  return model.role.startsWith("long tail") ? "tail" : "session";
}

export function summarize(result: ReplayResult, from: number, to: number): PolicyResult {
  const outcomes = result.outcomes.filter((o) => o.at >= from && o.at < to);
  let sleeping = 0;
  let cold = 0;
  const byModel = new Map<string, { hits: number; awakeHours: number; requests: number }>();
  const entry = (model: string) => {
    const e = byModel.get(model) ?? { hits: 0, awakeHours: 0, requests: 0 };
    byModel.set(model, e);
    return e;
  };
  for (const o of outcomes) {
    const e = entry(o.model);
    e.requests++;
    let hit = false;
    if (o.met === "cold" || o.met === "starting") {
      cold++;
      hit = true;
    } else if (
      o.met === "asleep-1" ||
      o.met === "asleep-2" ||
      o.met === "waking" ||
      (o.met === "draining" && o.waitMs > 0)
    ) {
      sleeping++;
      hit = true;
    }
    if (hit) e.hits++;
  }
  const times = tierTime(result.tiers, from, to);
  let awakeMs = 0;
  for (const [model, t] of times) {
    awakeMs += t.awakeMs;
    entry(model).awakeHours = t.awakeMs / 3_600_000;
  }
  const waits = outcomes.map((o) => o.waitMs);
  const prewarms = result.prewarms.filter((p) => p.began >= from && p.began < to);
  const prewarmMs = prewarms.reduce(
    (sum, p) => sum + Math.max(0, Math.min(p.ended ?? p.until, p.until) - p.began),
    0,
  );
  // The control plane's snooze_gpu_seconds_total (whole trace) against the benchmark's own count.
  const whole = tierTime(result.tiers, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
  let ours = 0;
  for (const t of whole.values()) ours += t.awakeMs / 1000;
  let theirs = 0;
  for (const a of Object.values(result.accounted)) theirs += a.awake;
  return {
    policy: result.policy,
    requests: outcomes.length,
    sleeping,
    cold,
    hits: sleeping + cold,
    waitP50Ms: percentile(waits, 50),
    waitP95Ms: percentile(waits, 95),
    waitP99Ms: percentile(waits, 99),
    refused: outcomes.filter((o) => o.refused).length,
    awakeHours: awakeMs / 3_600_000,
    prewarms: {
      total: prewarms.length,
      hit: prewarms.filter((p) => p.outcome === "hit").length,
      wasted: prewarms.filter((p) => p.outcome === "wasted").length,
      asleep: prewarms.filter((p) => p.outcome === "asleep").length,
      hours: prewarmMs / 3_600_000,
    },
    byModel,
    accountingError: ours > 0 ? Math.abs(theirs - ours) / ours : 0,
  };
}

export interface Goals {
  prewarm: { hitsRatio: number; awakeRatio: number; met: boolean };
  prewarmOnLearned: { hitsRatio: number; awakeRatio: number; met: boolean };
  learned: { awakeRatio: number; p95Fixed: number; p95Learned: number; met: boolean };
}

export function checkGoals(results: readonly PolicyResult[]): Goals {
  const get = (name: string) => {
    const r = results.find((x) => x.policy === name);
    if (!r) throw new Error(`no result for ${name}`);
    return r;
  };
  const fixed = get("snooze-fixed");
  const prewarm = get("snooze-prewarm");
  const learned = get("snooze-learned");
  const both = get("snooze-learned+prewarm");
  const pair = (base: PolicyResult, withPrewarm: PolicyResult) => {
    const hitsRatio = withPrewarm.hits / base.hits;
    const awakeRatio = withPrewarm.awakeHours / base.awakeHours;
    return { hitsRatio, awakeRatio, met: hitsRatio <= 0.5 && awakeRatio <= 1.1 };
  };
  return {
    prewarm: pair(fixed, prewarm),
    prewarmOnLearned: pair(learned, both),
    learned: {
      awakeRatio: learned.awakeHours / fixed.awakeHours,
      p95Fixed: fixed.waitP95Ms,
      p95Learned: learned.waitP95Ms,
      met: learned.awakeHours < fixed.awakeHours && learned.waitP95Ms <= fixed.waitP95Ms,
    },
  };
}
