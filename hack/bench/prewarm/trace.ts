import { createRandom, hashString } from "../../sim/random.ts";

/**
 * A seeded, replayable multi-day trace of requests for many models, shaped on published
 * LLM-serving traces (see docs/benchmarks.md, "Prewarm and the learned ladder"):
 *
 * - **Sessions** (chat, coding, agents): session starts are a non-homogeneous Poisson process whose
 *   rate follows the time of day and the day of the week (office hours with a morning ramp and a
 *   lunch dip; or evening-heavy consumer use; weekends lower), as the week-long Azure LLM inference
 *   trace 2024 and BurstGPT's daily cycles show. Within a session, requests follow each other after
 *   log-normal think times (heavy-tailed, so a session is bursty), and a session's length is
 *   geometric.
 * - **Surges**: now and then a head model gets a burst of extra sessions for 10-30 minutes
 *   (BurstGPT's bursts).
 * - **Scheduled jobs** (reports, ETL, cron): a clump of requests at a fixed time of day, week or
 *   hour, starting within seconds of it, now and then skipped (Azure Functions' timer triggers).
 * - **Long tail**: models used a few times a day or a week at random hours (most functions and
 *   most fine-tuned models are rarely used: Azure Functions 2019).
 *
 * Times are UTC ms; the trace starts on a Monday 00:00 so the weekly rhythm lines up with the
 * history's weeks. Token counts are log-normal.
 */
export const dayMs = 86_400_000;
export const hourMs = 3_600_000;
const minuteMs = 60_000;

export type Profile = "office" | "consumer" | "daytime" | "uniform";

export interface SessionSource {
  kind: "sessions";
  profile: Profile;
  /** Sessions per hour at the profile's peak. */
  peakPerHour: number;
  /** Rate on Saturday and Sunday, relative to weekdays. */
  weekend: number;
  requestsPerSession: number;
  /** Median think time between a session's requests, and the sigma of its log. */
  thinkMs: number;
  thinkSigma: number;
  /** Surges: expected per day, and how many times the peak rate they add. */
  surgesPerDay?: number;
  surgeFactor?: number;
}

export interface ScheduledSource {
  kind: "schedule";
  /** Days of the week it runs on (0 = Monday); empty: every day. */
  days: number[];
  /** Hours of the day it runs at (UTC), and the minute of those hours. */
  hours: number[];
  minute: number;
  requests: number;
  /** Time between the job's requests. */
  spacingMs: number;
  /** Share of runs skipped. */
  skip: number;
}

export type Source = SessionSource | ScheduledSource;

export interface TraceModel {
  id: string;
  sources: Source[];
}

export interface TraceRequest {
  id: number;
  model: string;
  at: number;
  inputTokens: number;
  outputTokens: number;
}

export interface Trace {
  seed: number;
  start: number;
  days: number;
  requests: TraceRequest[];
}

/** Monday 2025-01-06 00:00 UTC. */
export const traceStart = Date.UTC(2025, 0, 6);

/** Relative session rate by hour of the day (0–1). */
export function profileRate(profile: Profile, hourOfDay: number): number {
  const h = hourOfDay;
  switch (profile) {
    case "office":
      if (h < 7) return 0.02;
      if (h < 9.5) return 0.02 + 0.98 * ((h - 7) / 2.5);
      if (h < 12) return 1;
      if (h < 13.5) return 0.55;
      if (h < 16.5) return 1;
      if (h < 19) return 1 - 0.85 * ((h - 16.5) / 2.5);
      return 0.08;
    case "consumer":
      if (h < 1) return 0.35;
      if (h < 7) return 0.06;
      if (h < 12) return 0.3 + 0.3 * ((h - 7) / 5);
      if (h < 18) return 0.6;
      if (h < 23) return 1;
      return 0.6;
    case "daytime":
      return h >= 7 && h < 20 ? 1 : 0.05;
    case "uniform":
      return 1;
  }
}

function isWeekend(time: number, start: number): boolean {
  const day = Math.floor((time - start) / dayMs) % 7;
  return day >= 5;
}

export function generateTrace(
  models: readonly TraceModel[],
  days: number,
  seed: number,
  start = traceStart,
): Trace {
  const arrivals: Omit<TraceRequest, "id" | "inputTokens" | "outputTokens">[] = [];
  const end = start + days * dayMs;
  for (const model of models) {
    model.sources.forEach((source, index) => {
      const random = createRandom(hashString(`${model.id}:${index}`, seed));
      const times =
        source.kind === "sessions"
          ? sessionArrivals(source, start, end, random)
          : scheduledArrivals(source, start, end, random);
      for (const at of times) if (at < end) arrivals.push({ model: model.id, at: Math.round(at) });
    });
  }
  arrivals.sort((a, b) => a.at - b.at || a.model.localeCompare(b.model));
  const tokens = createRandom(hashString("tokens", seed));
  return {
    seed,
    start,
    days,
    requests: arrivals.map((a, id) => ({
      id,
      ...a,
      inputTokens: logNormal(tokens, 600, 0.9, 16, 8_000),
      outputTokens: logNormal(tokens, 180, 0.8, 8, 2_048),
    })),
  };
}

function sessionArrivals(s: SessionSource, start: number, end: number, random: () => number): number[] {
  const out: number[] = [];
  // Surges: windows of extra rate.
  const surges: { from: number; to: number }[] = [];
  if (s.surgesPerDay && s.surgesPerDay > 0) {
    for (
      let t = start + exponential(random, s.surgesPerDay / dayMs);
      t < end;
      t += exponential(random, s.surgesPerDay / dayMs)
    ) {
      const hour = ((t - start) % dayMs) / hourMs;
      if (profileRate(s.profile, hour) < 0.3) continue;
      surges.push({ from: t, to: t + (10 + 20 * random()) * minuteMs });
    }
  }
  const surgeFactor = s.surgeFactor ?? 0;
  const peak = (s.peakPerHour / hourMs) * (1 + surgeFactor);
  const rateAt = (t: number) => {
    const hour = ((t - start) % dayMs) / hourMs;
    let rate =
      (s.peakPerHour / hourMs) * profileRate(s.profile, hour) * (isWeekend(t, start) ? s.weekend : 1);
    if (surges.some((w) => t >= w.from && t < w.to)) rate += (s.peakPerHour / hourMs) * surgeFactor;
    return rate;
  };
  // Thinning: candidates at the peak rate, kept with probability rate(t)/peak.
  for (let t = start + exponential(random, peak); t < end; t += exponential(random, peak)) {
    if (random() * peak >= rateAt(t)) continue;
    const count = 1 + Math.floor(Math.log(1 - random()) / Math.log(1 - 1 / s.requestsPerSession));
    let at = t;
    for (let i = 0; i < count && at < end; i++) {
      out.push(at);
      at += logNormal(random, s.thinkMs, s.thinkSigma, 1_000, 30 * minuteMs);
    }
  }
  return out;
}

function scheduledArrivals(s: ScheduledSource, start: number, end: number, random: () => number): number[] {
  const out: number[] = [];
  for (let day = start; day < end; day += dayMs) {
    const dow = Math.floor((day - start) / dayMs) % 7;
    if (s.days.length > 0 && !s.days.includes(dow)) continue;
    for (const hour of s.hours) {
      if (random() < s.skip) continue;
      // A scheduler fires within seconds of its time; its requests follow one another.
      let at = day + hour * hourMs + s.minute * minuteMs + random() * 20_000;
      for (let i = 0; i < s.requests; i++) {
        out.push(at);
        at += s.spacingMs * (0.5 + random());
      }
    }
  }
  return out;
}

function exponential(random: () => number, ratePerMs: number): number {
  return -Math.log(1 - random()) / ratePerMs;
}

function logNormal(random: () => number, median: number, sigma: number, min: number, max: number): number {
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.min(max, Math.max(min, Math.round(Math.exp(Math.log(median) + sigma * normal))));
}
