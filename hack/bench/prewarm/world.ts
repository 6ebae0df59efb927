import type { TraceModel } from "./trace.ts";

/**
 * The benchmark's world: 20 models on 4 slots (one GPU each, five members per slot). Each slot
 * mixes a head model (busy sessions), a couple of medium ones, scheduled jobs and the long tail,
 * the way an operator would pack rarely-used models next to a busy one.
 *
 * Engine timings by size are assumptions scaled from issue 13's measurements of an 8B model
 * (level-1 sleep about 10 s because of the pinned host copy, wake 2 s; level-2 sleep fast, wake
 * about 6.5 s); the cold starts are assumed (weights from a local disk, CUDA graphs captured).
 */
export type Size = "3b" | "8b" | "14b" | "32b";

export interface EngineTimings {
  startMs: number;
  sleep1Ms: number;
  wake1Ms: number;
  sleep2Ms: number;
  wake2Ms: number;
  warmupMs: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
}

export const timings: Record<Size, EngineTimings> = {
  "3b": {
    startMs: 35_000,
    sleep1Ms: 4_000,
    wake1Ms: 900,
    sleep2Ms: 500,
    wake2Ms: 3_000,
    warmupMs: 150,
    prefillTokensPerSecond: 12_000,
    decodeTokensPerSecond: 90,
  },
  "8b": {
    startMs: 60_000,
    sleep1Ms: 10_000,
    wake1Ms: 2_000,
    sleep2Ms: 1_000,
    wake2Ms: 6_500,
    warmupMs: 300,
    prefillTokensPerSecond: 6_000,
    decodeTokensPerSecond: 55,
  },
  "14b": {
    startMs: 90_000,
    sleep1Ms: 17_000,
    wake1Ms: 3_500,
    sleep2Ms: 1_500,
    wake2Ms: 11_000,
    warmupMs: 400,
    prefillTokensPerSecond: 3_500,
    decodeTokensPerSecond: 40,
  },
  "32b": {
    startMs: 150_000,
    sleep1Ms: 38_000,
    wake1Ms: 7_500,
    sleep2Ms: 3_000,
    wake2Ms: 24_000,
    warmupMs: 600,
    prefillTokensPerSecond: 1_800,
    decodeTokensPerSecond: 25,
  },
};

/** Every start, sleep and wake takes its time ± this fraction. */
export const jitter = 0.15;

export interface WorldModel extends TraceModel {
  size: Size;
  slot: string;
  /** What it stands for, for the docs. */
  role: string;
}

const weekdays = [0, 1, 2, 3, 4];
const everyHour = Array.from({ length: 24 }, (_, h) => h);

export const worldModels: WorldModel[] = [
  // gpu-0: office chat and the jobs around it.
  {
    id: "chat-8b",
    size: "8b",
    slot: "gpu-0",
    role: "head: office-hours chat, surges",
    sources: [
      {
        kind: "sessions",
        profile: "office",
        peakPerHour: 6,
        weekend: 0.15,
        requestsPerSession: 6,
        thinkMs: 40_000,
        thinkSigma: 1,
        surgesPerDay: 0.5,
        surgeFactor: 3,
      },
    ],
  },
  {
    id: "docs-14b",
    size: "14b",
    slot: "gpu-0",
    role: "medium: document Q&A in office hours",
    sources: [
      {
        kind: "sessions",
        profile: "office",
        peakPerHour: 1,
        weekend: 0.1,
        requestsPerSession: 4,
        thinkMs: 60_000,
        thinkSigma: 0.8,
      },
    ],
  },
  {
    id: "report-8b",
    size: "8b",
    slot: "gpu-0",
    role: "job: weekday report at 06:00",
    sources: [
      { kind: "schedule", days: weekdays, hours: [6], minute: 0, requests: 30, spacingMs: 8_000, skip: 0.05 },
    ],
  },
  {
    id: "nightly-8b",
    size: "8b",
    slot: "gpu-0",
    role: "job: nightly batch at 02:00",
    sources: [
      { kind: "schedule", days: [], hours: [2], minute: 0, requests: 80, spacingMs: 10_000, skip: 0.05 },
    ],
  },
  {
    id: "tail-3b-a",
    size: "3b",
    slot: "gpu-0",
    role: "long tail: a few sessions a day",
    sources: [
      {
        kind: "sessions",
        profile: "uniform",
        peakPerHour: 0.12,
        weekend: 1,
        requestsPerSession: 2,
        thinkMs: 30_000,
        thinkSigma: 0.8,
      },
    ],
  },
  // gpu-1: coding.
  {
    id: "code-3b",
    size: "3b",
    slot: "gpu-1",
    role: "head: IDE completions in office hours",
    sources: [
      {
        kind: "sessions",
        profile: "office",
        peakPerHour: 2,
        weekend: 0.1,
        requestsPerSession: 40,
        thinkMs: 15_000,
        thinkSigma: 1.2,
      },
    ],
  },
  {
    id: "review-14b",
    size: "14b",
    slot: "gpu-1",
    role: "medium: code review bursts",
    sources: [
      {
        kind: "sessions",
        profile: "office",
        peakPerHour: 0.8,
        weekend: 0.05,
        requestsPerSession: 8,
        thinkMs: 5_000,
        thinkSigma: 0.7,
      },
    ],
  },
  {
    id: "hourly-3b",
    size: "3b",
    slot: "gpu-1",
    role: "job: every hour at :00",
    sources: [
      { kind: "schedule", days: [], hours: everyHour, minute: 0, requests: 6, spacingMs: 5_000, skip: 0.02 },
    ],
  },
  {
    id: "tail-8b-b",
    size: "8b",
    slot: "gpu-1",
    role: "long tail: about one session a day",
    sources: [
      {
        kind: "sessions",
        profile: "daytime",
        peakPerHour: 0.08,
        weekend: 0.5,
        requestsPerSession: 3,
        thinkMs: 40_000,
        thinkSigma: 0.8,
      },
    ],
  },
  {
    id: "tail-14b-c",
    size: "14b",
    slot: "gpu-1",
    role: "long tail: a few sessions a week",
    sources: [
      {
        kind: "sessions",
        profile: "uniform",
        peakPerHour: 0.02,
        weekend: 1,
        requestsPerSession: 3,
        thinkMs: 40_000,
        thinkSigma: 0.8,
      },
    ],
  },
  // gpu-2: an assistant used in the evenings too, an API and ETL.
  {
    id: "assistant-14b",
    size: "14b",
    slot: "gpu-2",
    role: "head: consumer assistant, evenings and weekends",
    sources: [
      {
        kind: "sessions",
        profile: "consumer",
        peakPerHour: 4,
        weekend: 1.2,
        requestsPerSession: 5,
        thinkMs: 45_000,
        thinkSigma: 1,
        surgesPerDay: 0.3,
        surgeFactor: 2,
      },
    ],
  },
  {
    id: "summarize-8b",
    size: "8b",
    slot: "gpu-2",
    role: "medium: API clients, bursty, daytime",
    sources: [
      {
        kind: "sessions",
        profile: "daytime",
        peakPerHour: 0.7,
        weekend: 0.4,
        requestsPerSession: 10,
        thinkMs: 3_000,
        thinkSigma: 1.2,
      },
    ],
  },
  {
    id: "etl-32b",
    size: "32b",
    slot: "gpu-2",
    role: "job: every 4 hours at :30",
    sources: [
      {
        kind: "schedule",
        days: [],
        hours: [0, 4, 8, 12, 16, 20],
        minute: 30,
        requests: 12,
        spacingMs: 20_000,
        skip: 0.05,
      },
    ],
  },
  {
    id: "tail-3b-d",
    size: "3b",
    slot: "gpu-2",
    role: "long tail: a few sessions a day",
    sources: [
      {
        kind: "sessions",
        profile: "daytime",
        peakPerHour: 0.2,
        weekend: 0.3,
        requestsPerSession: 2,
        thinkMs: 20_000,
        thinkSigma: 0.8,
      },
    ],
  },
  {
    id: "tail-8b-e",
    size: "8b",
    slot: "gpu-2",
    role: "long tail: about one session every two days",
    sources: [
      {
        kind: "sessions",
        profile: "uniform",
        peakPerHour: 0.02,
        weekend: 1,
        requestsPerSession: 3,
        thinkMs: 30_000,
        thinkSigma: 0.8,
      },
    ],
  },
  // gpu-3: big models, agents and meetings.
  {
    id: "agent-32b",
    size: "32b",
    slot: "gpu-3",
    role: "medium: agent runs on weekdays, rapid requests",
    sources: [
      {
        kind: "sessions",
        profile: "office",
        peakPerHour: 0.7,
        weekend: 0.1,
        requestsPerSession: 25,
        thinkMs: 8_000,
        thinkSigma: 0.9,
      },
    ],
  },
  {
    id: "translate-8b",
    size: "8b",
    slot: "gpu-3",
    role: "medium: daytime translation requests",
    sources: [
      {
        kind: "sessions",
        profile: "daytime",
        peakPerHour: 3,
        weekend: 0.5,
        requestsPerSession: 1.5,
        thinkMs: 20_000,
        thinkSigma: 0.8,
      },
    ],
  },
  {
    id: "standup-14b",
    size: "14b",
    slot: "gpu-3",
    role: "job: weekday stand-up notes at 09:30",
    sources: [
      {
        kind: "schedule",
        days: weekdays,
        hours: [9],
        minute: 30,
        requests: 15,
        spacingMs: 30_000,
        skip: 0.1,
      },
    ],
  },
  {
    id: "weekly-14b",
    size: "14b",
    slot: "gpu-3",
    role: "job: Monday 07:00 weekly digest",
    sources: [
      { kind: "schedule", days: [0], hours: [7], minute: 0, requests: 40, spacingMs: 15_000, skip: 0 },
    ],
  },
  {
    id: "tail-32b-f",
    size: "32b",
    slot: "gpu-3",
    role: "long tail: about one session a week",
    sources: [
      {
        kind: "sessions",
        profile: "uniform",
        peakPerHour: 0.006,
        weekend: 1,
        requestsPerSession: 3,
        thinkMs: 60_000,
        thinkSigma: 0.8,
      },
    ],
  },
];

export const slots = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"];

/** The policies compared: each is Snooze's controller with these settings for every model. */
export interface Policy {
  name: string;
  /** What it stands for, for the docs. */
  description: string;
  /** Tier settings in snooze.yaml form (every model). */
  settings: Record<string, unknown>;
}

export const prewarmBudget = "20m";
export const wakeTarget = "3s";

export const policies: Policy[] = [
  {
    name: "always-on",
    description:
      "never sleeps on its own (sleepAfter: never); a member leaves its GPU only for another member's requests",
    settings: { sleepAfter: "never" },
  },
  {
    name: "knative-like",
    description:
      "scale to zero: no sleep mode, stop after 90 s idle (Knative's 60 s stable window + 30 s grace); every activation a cold start",
    settings: { sleep: false, sleepAfter: "90s" },
  },
  {
    name: "llama-swap-like",
    description:
      "TTL unload: no sleep mode, stop after 5 min idle (`ttl: 300`); every activation a cold start",
    settings: { sleep: false, sleepAfter: "5m" },
  },
  {
    name: "snooze-fixed",
    description:
      "Snooze's fixed ladder (defaults): sleep at level 1 after 5 min, stop after 30 min asleep (a slot member stops instead of deepening)",
    settings: {},
  },
  {
    name: "snooze-prewarm",
    description: `the fixed ladder plus prewarm (prewarmBudget: ${prewarmBudget})`,
    settings: { prewarmBudget },
  },
  {
    name: "snooze-learned",
    description: `the learned ladder (wakeTarget: ${wakeTarget})`,
    settings: { wakeTarget },
  },
  {
    name: "snooze-learned+prewarm",
    description: `learned ladder and prewarm (wakeTarget: ${wakeTarget}, prewarmBudget: ${prewarmBudget})`,
    settings: { wakeTarget, prewarmBudget },
  },
];

/** The same prewarm policies with other budgets: how hits and awake time move with the budget. */
export const budgetSweep: Policy[] = ["10m", "1h"].flatMap((budget) => [
  {
    name: `snooze-prewarm ${budget}`,
    description: `the fixed ladder plus prewarm (prewarmBudget: ${budget})`,
    settings: { prewarmBudget: budget },
  },
  {
    name: `snooze-learned+prewarm ${budget}`,
    description: `learned ladder and prewarm (wakeTarget: ${wakeTarget}, prewarmBudget: ${budget})`,
    settings: { wakeTarget, prewarmBudget: budget },
  },
]);
