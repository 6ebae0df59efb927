import { Registry } from "prom-client";
import { localActivator, localAutoscaler } from "../../../autoscaler/local/control-plane.ts";
import type { Logger } from "../../../lib/log.ts";
import { isAsleep, isResident, type ReplicaEvent, type Tier } from "../../../lib/replica-event.ts";
import { parseConfig } from "../../../lib/settings/index.ts";
import { FakePlatform } from "../../../test/support/fake-platform.ts";
import { ManualClock } from "../../../test/support/manual-clock.ts";
import { createRandom, hashString } from "../../sim/random.ts";
import type { Trace, TraceRequest } from "./trace.ts";
import { jitter, type Policy, timings, type WorldModel } from "./world.ts";

/**
 * Replays a trace through the real control plane in virtual time: `localAutoscaler` (the real
 * Autoscaler, ModelController, Slot, ladder and arbiter) on a manual clock, over the fake platform
 * of the unit tests, whose engines take the modelled time for each start, sleep, wake and
 * warm-up. In front of it a small activator does what the real one does with the seam: a request
 * finds a ready replica and is dispatched, or it is held and `demand` is signalled; every change of
 * in-flight and held counts goes to `stats` at once; held requests are released when a replica of
 * their model turns ready (from the replica events). Requests run for their prefill plus decode
 * time; concurrency is unlimited (an engine batches), so waiting is only for activations and swaps.
 */
export interface RequestOutcome {
  id: number;
  model: string;
  at: number;
  /** The model's tier when the request arrived (`ready`: served at once). */
  met: Tier;
  waitMs: number;
  refused: boolean;
}

export interface TierSpan {
  model: string;
  tier: Tier;
  from: number;
  to: number;
}

export interface PrewarmRecord {
  model: string;
  kind: string;
  began: number;
  until: number;
  ended?: number;
  outcome?: string;
}

export interface ReplayResult {
  policy: string;
  outcomes: RequestOutcome[];
  tiers: TierSpan[];
  prewarms: PrewarmRecord[];
  /** The control plane's own accounting (snooze_gpu_seconds_total), over the whole trace, per model. */
  accounted: Record<string, { awake: number; asleep: number; saved: number }>;
  /** Replica events seen. */
  events: number;
  wallMs: number;
}

const holdBudgetMs = 300_000;

export function configYaml(models: readonly WorldModel[], slots: readonly string[], policy: Policy): string {
  const settings = Object.entries(policy.settings)
    .map(([k, v]) => `    ${k}: ${JSON.stringify(v)}`)
    .join("\n");
  const lines = [
    "slots:",
    ...slots.map((s) => `  ${s}: {}`),
    "models:",
    ...models.flatMap((m) => [
      `  ${m.id}:`,
      `    command: [engine, "\${PORT}"]`,
      `    slot: ${m.slot}`,
      ...(settings ? [settings] : []),
    ]),
  ];
  return `${lines.join("\n")}\n`;
}

export async function replay(
  trace: Trace,
  models: readonly WorldModel[],
  slots: readonly string[],
  policy: Policy,
  seed: number,
): Promise<ReplayResult> {
  const wallStart = performance.now();
  const config = parseConfig(configYaml(models, slots, policy), `${policy.name}.yaml`);
  const clock = new ManualClock(trace.start);
  const sizeOf = new Map(models.map((m) => [m.id, m.size]));
  const opCount = new Map<string, number>();
  const jittered = (model: string, op: string, mean: number) => {
    const key = `${model}:${op}`;
    const n = (opCount.get(key) ?? 0) + 1;
    opCount.set(key, n);
    const r = createRandom(hashString(`${key}:${n}`, seed))();
    return Math.round(mean * (1 + jitter * (2 * r - 1)));
  };
  const platform: FakePlatform = new FakePlatform(config.models.keys(), {
    clock,
    onEngine: (engine, model) => {
      const t = timings[sizeOf.get(model)!];
      const wake = engine.wake.bind(engine);
      const sleep = engine.sleep.bind(engine);
      engine.wake = (level, timeoutMs) => {
        engine.latency.wake = jittered(model, `wake${level}`, level === 1 ? t.wake1Ms : t.wake2Ms);
        return wake(level, timeoutMs);
      };
      engine.sleep = (level, mode, timeoutMs) => {
        engine.latency.sleep = jittered(model, `sleep${level}`, level === 1 ? t.sleep1Ms : t.sleep2Ms);
        return sleep(level, mode, timeoutMs);
      };
      engine.latency.warmup = t.warmupMs;
      // The process loads its weights, then answers /health.
      clock.setTimeout(
        () => {
          if (platform.replica(engine.id)) platform.bringUp(engine.id);
        },
        jittered(model, "start", t.startMs),
      );
    },
  });
  const prewarms: PrewarmRecord[] = [];
  const open = new Map<string, PrewarmRecord>();
  const log = recordingLogger({}, (msg, fields) => {
    const model = String(fields.model);
    if (msg === "prewarm") {
      const record: PrewarmRecord = {
        model,
        kind: String(fields.kind),
        began: clock.now(),
        until: clock.now() + Number(fields.forMs ?? 0),
      };
      open.set(model, record);
      prewarms.push(record);
    } else if (msg === "prewarm ended") {
      const record = open.get(model);
      if (record) {
        record.ended = clock.now();
        record.outcome = String(fields.outcome);
        open.delete(model);
      }
    }
  });
  const autoscaler = localAutoscaler({ config, platform, log, registry: new Registry(), clock });

  // --- the activator ---
  interface Route {
    tiers: Map<string, Tier>;
    ready: boolean;
    held: { request: TraceRequest; outcome: RequestOutcome }[];
    inFlight: number;
  }
  const routes = new Map<string, Route>(
    models.map((m) => [m.id, { tiers: new Map(), ready: false, held: [], inFlight: 0 }]),
  );
  const outcomes: RequestOutcome[] = [];
  const completions = new MinHeap();
  const tierOf = new Map<string, { tier: Tier; since: number }>();
  const tiers: TierSpan[] = [];
  let events = 0;
  const report = (model: string) => {
    const route = routes.get(model)!;
    autoscaler.stats(localActivator, model, { inFlight: route.inFlight, held: route.held.length });
  };
  const dispatch = (model: string, request: TraceRequest) => {
    const route = routes.get(model)!;
    route.inFlight++;
    const t = timings[sizeOf.get(model)!];
    const ms = Math.max(
      1,
      Math.round(
        (request.inputTokens / t.prefillTokensPerSecond + request.outputTokens / t.decodeTokensPerSecond) *
          1000,
      ),
    );
    completions.push(clock.now() + ms, model);
  };
  const release = (model: string) => {
    const route = routes.get(model)!;
    if (route.held.length === 0) return;
    const now = clock.now();
    for (const { request, outcome } of route.held.splice(0)) {
      outcome.waitMs = now - request.at;
      if (outcome.waitMs > holdBudgetMs) {
        outcome.refused = true;
        outcome.waitMs = holdBudgetMs;
      } else dispatch(model, request);
    }
    report(model);
  };
  autoscaler.watch((event: ReplicaEvent) => {
    events++;
    const route = routes.get(event.model);
    if (!route) return;
    if (event.tier === "cold") route.tiers.delete(event.replica);
    else route.tiers.set(event.replica, event.tier);
    const modelTier = mostAwake([...route.tiers.values()]);
    const before = tierOf.get(event.model);
    if (!before || before.tier !== modelTier) {
      if (before) tiers.push({ model: event.model, tier: before.tier, from: before.since, to: clock.now() });
      tierOf.set(event.model, { tier: modelTier, since: clock.now() });
    }
    const wasReady = route.ready;
    route.ready = modelTier === "ready";
    if (route.ready && !wasReady) release(event.model);
  });

  const arrive = (request: TraceRequest) => {
    const route = routes.get(request.model)!;
    const met: Tier = route.ready ? "ready" : (tierOf.get(request.model)?.tier ?? "cold");
    const outcome: RequestOutcome = {
      id: request.id,
      model: request.model,
      at: request.at,
      met,
      waitMs: 0,
      refused: false,
    };
    outcomes.push(outcome);
    if (route.ready) {
      dispatch(request.model, request);
      report(request.model);
      return;
    }
    route.held.push({ request, outcome });
    autoscaler.demand(localActivator, request.model);
    report(request.model);
  };

  // --- virtual time ---
  const end = trace.start + trace.days * 86_400_000;
  let next = 0;
  const requests = trace.requests;
  for (;;) {
    const arrival = next < requests.length ? requests[next]!.at : Number.POSITIVE_INFINITY;
    const completion = completions.peek() ?? Number.POSITIVE_INFINITY;
    const at = Math.min(arrival, completion);
    if (!Number.isFinite(at)) break;
    if (at > clock.now()) await clock.advanceAndSettle(at - clock.now());
    if (completion <= arrival) {
      const model = completions.pop()!;
      routes.get(model)!.inFlight--;
      report(model);
    } else arrive(requests[next++]!);
    await clock.settle(1);
  }
  if (end > clock.now()) await clock.advanceAndSettle(end - clock.now());
  for (const [model, t] of tierOf)
    tiers.push({ model, tier: t.tier, from: t.since, to: Math.max(t.since, end) });
  const accounted: ReplayResult["accounted"] = {};
  for (const state of autoscaler.states())
    if (state.learning) accounted[state.id] = state.learning.gpuSeconds;
  autoscaler.close();
  return {
    policy: policy.name,
    outcomes,
    tiers,
    prewarms,
    accounted,
    events,
    wallMs: performance.now() - wallStart,
  };
}

const order: Tier[] = ["ready", "waking", "starting", "draining", "asleep-1", "asleep-2", "cold"];

function mostAwake(tiers: Tier[]): Tier {
  let best: Tier = "cold";
  for (const t of tiers) if (order.indexOf(t) < order.indexOf(best)) best = t;
  return best;
}

/** Awake (resident) and asleep time of a model's tier spans within [from, to). */
export function tierTime(spans: readonly TierSpan[], from: number, to: number) {
  const byModel = new Map<string, { awakeMs: number; asleepMs: number }>();
  for (const s of spans) {
    const overlap = Math.min(to, s.to) - Math.max(from, s.from);
    if (overlap <= 0) continue;
    const entry = byModel.get(s.model) ?? { awakeMs: 0, asleepMs: 0 };
    if (isResident(s.tier)) entry.awakeMs += overlap;
    else if (isAsleep(s.tier)) entry.asleepMs += overlap;
    byModel.set(s.model, entry);
  }
  return byModel;
}

/** A logger that hands each line's message and fields (merged with its children's) to `sink`. */
function recordingLogger(
  base: Record<string, unknown>,
  sink: (msg: string, fields: Record<string, unknown>) => void,
): Logger {
  const emit = (msg: string, fields?: Record<string, unknown>) => {
    if (msg === "prewarm" || msg === "prewarm ended") sink(msg, { ...base, ...fields });
  };
  return {
    debug: () => {},
    info: emit,
    warn: () => {},
    error: () => {},
    child: (fields) => recordingLogger({ ...base, ...fields }, sink),
  };
}

/** Completion times with their model, earliest first. */
class MinHeap {
  private readonly items: { at: number; model: string }[] = [];

  push(at: number, model: string): void {
    const items = this.items;
    items.push({ at, model });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]!.at <= items[i]!.at) break;
      [items[parent], items[i]] = [items[i]!, items[parent]!];
      i = parent;
    }
  }

  peek(): number | undefined {
    return this.items[0]?.at;
  }

  pop(): string | undefined {
    const items = this.items;
    if (items.length === 0) return undefined;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && items[l]!.at < items[m]!.at) m = l;
        if (r < items.length && items[r]!.at < items[m]!.at) m = r;
        if (m === i) break;
        [items[m], items[i]] = [items[i]!, items[m]!];
        i = m;
      }
    }
    return top.model;
  }
}
