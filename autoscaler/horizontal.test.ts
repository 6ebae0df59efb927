import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { isAsleep, type Tier, tiers } from "../lib/replica-event.ts";
import {
  burstInFlight,
  decideReplicas,
  type HorizontalInput,
  keptFor,
  progressDeadlineMargin,
  type ReplicaView,
} from "./horizontal.ts";

const settings = {
  sleep: true,
  sleepAfter: 60_000,
  sleepLevel: 1 as const,
  deepSleepAfter: 600_000,
  zeroAfter: 3_600_000,
  startTimeout: 300_000,
};
const now = 10_000_000;
/** The tiers a pod the platform lists can be in. */
const podTiers = tiers.filter((tier) => tier !== "cold");

const replica = (pod: string, tier: Tier, extra: Partial<ReplicaView> = {}): ReplicaView => ({
  pod,
  tier,
  since: now - 1_000,
  asleepSince: now - 1_000,
  podReady: true,
  busy: false,
  load: 0,
  ...extra,
});

const input = (replicas: ReplicaView[], extra: Partial<HorizontalInput> = {}): HorizontalInput => ({
  replicas,
  pendingPods: 0,
  workloadReplicas: replicas.length,
  minReplicas: 0,
  minPods: 0,
  maxReplicas: 5,
  concurrency: 0,
  inFlight: 0,
  held: 0,
  burst: 0,
  lastActive: now - 1_000,
  now,
  backoffUntil: 0,
  settings,
  ...extra,
});

const kinds = (plan: ReturnType<typeof decideReplicas>) =>
  plan.actions.map((a) =>
    "pod" in a
      ? `${a.kind} ${a.pod}`
      : "pods" in a
        ? `${a.kind} ${a.pods} to ${a.to}`
        : `${a.kind} to ${a.to}`,
  );

describe("decideReplicas", () => {
  test("a held request with nothing awake and no pods scales the workload from zero", () => {
    const plan = decideReplicas(input([], { held: 1 }));
    expect(kinds(plan)).toEqual(["scale-up to 1"]);
    expect(plan.target).toBe(1);
  });

  test("a pod the workload asked for counts as starting: no second scale-up", () => {
    const plan = decideReplicas(input([], { held: 3, pendingPods: 1, workloadReplicas: 1 }));
    expect(plan.actions).toEqual([]);
    expect(plan.awake).toBe(1);
  });

  test("a held request wakes a sleeper instead of starting a pod", () => {
    const plan = decideReplicas(input([replica("a", "asleep-2"), replica("b", "asleep-1")], { held: 1 }));
    expect(kinds(plan)).toEqual(["wake b"]);
  });

  test("spec.replicas above the awake count wakes every sleeper first and starts pods only for the rest", () => {
    const plan = decideReplicas(
      input([replica("r", "ready"), replica("s1", "asleep-1"), replica("s2", "asleep-2")], { desired: 5 }),
    );
    expect(kinds(plan)).toEqual(["wake s1", "wake s2", "scale-up to 5"]);
  });

  test("maxReplicas bounds the awake count and the pods", () => {
    const plan = decideReplicas(input([replica("r", "ready")], { desired: 9, maxReplicas: 2 }));
    expect(kinds(plan)).toEqual(["scale-up to 2"]);
    expect(plan.target).toBe(2);
  });

  test("a draining replica is taken back before any sleeper wakes", () => {
    const plan = decideReplicas(
      input([replica("d", "draining", { busy: true }), replica("s", "asleep-1")], { held: 1 }),
    );
    expect(kinds(plan)).toEqual(["undrain d"]);
  });

  test("a replica left draining with nothing under way (its stop failed after the drain) is released again; one whose drain runs is left to it", () => {
    const left = decideReplicas(input([replica("d", "draining")], { parked: true }));
    expect(kinds(left)).toEqual(["drain-and-sleep d"]);
    const stopping = decideReplicas(
      input([replica("d", "draining")], { settings: { ...settings, sleep: false } }),
    );
    expect(kinds(stopping)).toEqual(["drain-and-stop d"]);
    expect(kinds(decideReplicas(input([replica("d", "draining", { busy: true })])))).toEqual([]);
  });

  test("spec.replicas below the awake count puts the idlest awake replicas to sleep", () => {
    const plan = decideReplicas(
      input(
        [
          replica("busy", "ready", { load: 4 }),
          replica("idle", "ready", { load: 0, since: now - 5 }),
          replica("older-idle", "ready", { load: 0, since: now - 50 }),
        ],
        { desired: 1, inFlight: 4 },
      ),
    );
    expect(kinds(plan)).toEqual(["drain-and-sleep older-idle", "drain-and-sleep idle"]);
  });

  test("spec.replicas 0 (KEDA's all asleep): the replica a request woke stays awake until sleepAfter idle, then sleeps", () => {
    const served = replica("r", "ready", { since: now - 90_000 });
    const fresh = decideReplicas(input([served], { desired: 0, lastActive: now - 10_000 }));
    expect(fresh.actions).toEqual([]);
    expect(fresh.target).toBe(1);
    expect(fresh.nextAt).toBe(now - 10_000 + settings.sleepAfter);
    const idle = decideReplicas(input([served], { desired: 0, lastActive: now - 61_000 }));
    expect(kinds(idle)).toEqual(["drain-and-sleep r"]);
    expect(idle.target).toBe(0);
  });

  test("spec.replicas 0 under load keeps one awake, not every ready replica: demand adds at most one to the count", () => {
    const three = ["a", "b", "c"].map((p, i) => replica(p, "ready", { since: now - 90_000 + i }));
    const plan = decideReplicas(input(three, { desired: 0, inFlight: 3 }));
    expect(plan.target).toBe(1);
    expect(kinds(plan)).toEqual(["drain-and-sleep a", "drain-and-sleep b"]);
  });

  test("with concurrency set and no count, held and in-flight requests ask for the replicas they need, up to maxReplicas", () => {
    // Two sleepers and one ready replica; 5 requests at concurrency 2 need 3 replicas: both wake.
    const world = [replica("r", "ready"), replica("s1", "asleep-1"), replica("s2", "asleep-2")];
    const plan = decideReplicas(input(world, { concurrency: 2, held: 4, inFlight: 1, lastActive: now }));
    expect(plan.target).toBe(3);
    expect(kinds(plan)).toEqual(["wake s1", "wake s2"]);
    // KEDA's 0 is no count either: 300 requests at concurrency 1 start pods up to maxReplicas 3.
    const burst = decideReplicas(
      input([replica("r", "ready")], {
        desired: 0,
        concurrency: 1,
        held: 299,
        inFlight: 1,
        maxReplicas: 3,
        lastActive: now,
      }),
    );
    expect(burst.target).toBe(3);
    expect(kinds(burst)).toEqual(["scale-up to 3"]);
    // Without concurrency a replica takes any number: demand keeps one.
    expect(
      decideReplicas(input([replica("r", "ready")], { desired: 0, held: 299, lastActive: now })).target,
    ).toBe(1);
  });

  test("a count of 1 or more wins over the requests' need, and a parked model stays parked", () => {
    const plan = decideReplicas(
      input([replica("r", "ready")], { desired: 1, concurrency: 1, held: 9, inFlight: 1, lastActive: now }),
    );
    expect(plan.target).toBe(1);
    const parked = decideReplicas(
      input([replica("s", "asleep-1")], { concurrency: 1, inFlight: 0, held: 0, parked: true }),
    );
    expect(parked.target).toBe(0);
  });

  test("a count of 1 or more is obeyed under load: an HPA's scale-down drains the surplus", () => {
    const three = ["a", "b", "c"].map((p, i) => replica(p, "ready", { since: now - 90_000 + i }));
    const plan = decideReplicas(input(three, { desired: 2, inFlight: 6, lastActive: now }));
    expect(plan.target).toBe(2);
    expect(kinds(plan)).toEqual(["drain-and-sleep a"]);
  });

  test("a count lowered below what held requests fill (KEDA's 1 after zero) keeps those replicas until the burst is done", () => {
    // Found by an outside tester with real KEDA: three replicas woken for six held requests at
    // concurrency 1, then KEDA's activation writes 1.
    const three = ["a", "b", "c"].map((p, i) => replica(p, "ready", { since: now - 2_000 + i }));
    const kept = decideReplicas(
      input(three, { desired: 1, concurrency: 1, held: 3, inFlight: 3, lastActive: now }),
    );
    expect(kept.target).toBe(3);
    expect(kept.actions).toEqual([]);
    // Fewer requests than replicas: only the replicas they fill stay.
    const fewer = decideReplicas(
      input(three, { desired: 1, concurrency: 1, held: 1, inFlight: 1, lastActive: now }),
    );
    expect(fewer.target).toBe(2);
    expect(kinds(fewer)).toEqual(["drain-and-sleep a"]);
    // Warming replicas count as capacity the held requests wait for: none of them is given up.
    const starting = ["a", "b", "c"].map((p) => replica(p, "starting", { podReady: false }));
    expect(
      decideReplicas(input(starting, { desired: 1, concurrency: 1, held: 6, lastActive: now })).target,
    ).toBe(3);
    // Nothing held any more: the replicas the burst's requests still run on stay, each released as
    // they finish (the queue can empty before KEDA's HPA writes its first count: seen in e2e).
    const running = decideReplicas(
      input(three, { desired: 1, concurrency: 1, held: 0, inFlight: 3, burst: 3, lastActive: now }),
    );
    expect(running.target).toBe(3);
    expect(running.actions).toEqual([]);
    const finishing = decideReplicas(
      input(three, { desired: 1, concurrency: 1, held: 0, inFlight: 2, burst: 2, lastActive: now }),
    );
    expect(kinds(finishing)).toEqual(["drain-and-sleep a"]);
    // Requests that came after the queue emptied keep nothing: the count is obeyed, and they finish
    // on the draining replicas.
    const obeyed = decideReplicas(
      input(three, { desired: 1, concurrency: 1, held: 0, inFlight: 3, burst: 0, lastActive: now }),
    );
    expect(obeyed.target).toBe(1);
    expect(kinds(obeyed)).toEqual(["drain-and-sleep a", "drain-and-sleep b"]);
    // It keeps, it never adds: one awake replica and nine held stay one under a count of 1.
    expect(
      decideReplicas(
        input([replica("r", "ready"), replica("s", "asleep-1")], {
          desired: 1,
          concurrency: 1,
          held: 9,
          lastActive: now,
        }),
      ).actions,
    ).toEqual([]);
    // A slot's cap still wins.
    expect(
      decideReplicas(input(three, { desired: 1, concurrency: 1, held: 3, inFlight: 3, cap: 1 })).target,
    ).toBe(1);
  });

  test("burstInFlight: all of a burst while any is held, then only its requests, as they finish", () => {
    let burst = 0;
    const pass = (held: number, inFlight: number) => {
      burst = burstInFlight(burst, { held, inFlight });
      return burst;
    };
    expect(pass(0, 4)).toBe(0);
    expect(pass(6, 0)).toBe(6);
    expect(pass(3, 3)).toBe(6);
    // The queue empties: everything released is in flight.
    expect(pass(0, 6)).toBe(6);
    expect(pass(0, 4)).toBe(4);
    // A new request after the queue emptied does not count.
    expect(pass(0, 5)).toBe(4);
    expect(pass(0, 0)).toBe(0);
    expect(pass(0, 2)).toBe(0);
  });

  test("the Model's minReplicas holds under an external count of 0", () => {
    const plan = decideReplicas(
      input([replica("a", "ready", { since: now - 900_000 })], {
        desired: 0,
        minReplicas: 1,
        lastActive: now - 900_000,
      }),
    );
    expect(plan.target).toBe(1);
    expect(plan.actions).toEqual([]);
  });

  test("a person's sleep (parked) sleeps the replica at once, sleepAfter or not, whatever the count", () => {
    const plan = decideReplicas(
      input([replica("r", "ready")], { desired: 1, parked: true, lastActive: now - 1_000 }),
    );
    expect(kinds(plan)).toEqual(["drain-and-sleep r"]);
  });

  test("warming replicas are never put to sleep mid-activation", () => {
    const plan = decideReplicas(
      input([replica("w", "waking"), replica("s", "starting", { podReady: false })], { desired: 0 }),
    );
    expect(plan.actions).toEqual([]);
  });

  test("on demand: ready replicas sleep only after sleepAfter idle, and say when to look again", () => {
    const fresh = decideReplicas(
      input([replica("r", "ready", { since: now - 90_000 })], { lastActive: now - 10_000 }),
    );
    expect(fresh.actions).toEqual([]);
    expect(fresh.nextAt).toBe(now - 10_000 + settings.sleepAfter);
    const idle = decideReplicas(
      input([replica("r", "ready", { since: now - 90_000 })], { lastActive: now - 61_000 }),
    );
    expect(kinds(idle)).toEqual(["drain-and-sleep r"]);
  });

  test("minReplicas keeps that many awake even when idle, and wakes one if needed", () => {
    const plan = decideReplicas(
      input([replica("a", "ready", { since: now - 90_000 }), replica("b", "asleep-1")], {
        lastActive: now - 100_000,
        minReplicas: 2,
      }),
    );
    expect(kinds(plan)).toEqual(["wake b"]);
  });

  test("without sleep support an idle replica drains and stops", () => {
    const plan = decideReplicas(
      input([replica("r", "ready", { since: now - 90_000 })], {
        lastActive: now - 100_000,
        settings: { ...settings, sleep: false },
      }),
    );
    expect(kinds(plan)).toEqual(["drain-and-stop r"]);
  });

  test("sleepers deepen, then go to zero; a scale-down waits until every pod is up", () => {
    const deep = replica("deep", "asleep-1", { since: now - 700_000, asleepSince: now - 700_000 });
    const old = replica("old", "asleep-2", { asleepSince: now - 4_000_000 });
    expect(kinds(decideReplicas(input([deep, old])))).toEqual(["deepen deep", "stop old to 1"]);
    const starting = replica("new", "starting", { podReady: false });
    expect(kinds(decideReplicas(input([old, starting])))).toEqual([]);
  });

  test("minPods keeps that many pods, asleep, past zeroAfter; the ones above it go to zero", () => {
    const old = (pod: string, tier: Tier, asleepFor: number) =>
      replica(pod, tier, { since: now - asleepFor, asleepSince: now - asleepFor });
    // Three sleepers past zeroAfter (3600 s), a floor of one: the deepest and longest asleep go.
    const three = [
      old("a", "asleep-1", 3_700_000),
      old("b", "asleep-2", 3_800_000),
      old("c", "asleep-2", 5_000_000),
    ];
    expect(kinds(decideReplicas(input(three, { minPods: 1 })))).toEqual(["deepen a", "stop c,b to 1"]);
    // At the floor, a sleeper past zeroAfter stays, and nothing is planned for it on the clock.
    const kept = decideReplicas(input([old("a", "asleep-2", 9_000_000)], { minPods: 1 }));
    expect(kept.actions).toEqual([]);
    expect(kept.nextAt).toBe(Number.POSITIVE_INFINITY);
    // An idle awake pod above nothing still sleeps: the floor is pods, not awake ones.
    const idle = decideReplicas(
      input([replica("r", "ready", { since: now - 90_000 })], { minPods: 1, lastActive: now - 61_000 }),
    );
    expect(kinds(idle)).toEqual(["drain-and-sleep r"]);
  });

  test("pods above maxReplicas (Knative's initial-scale above max-scale made them) go once asleep, not after zeroAfter", () => {
    // A revision created with initial-scale 3 and max-scale 1: Knative's Deployment starts 3 pods,
    // the PA counts them up, then 2 sleep. Knative's KPA scales such a revision to its max-scale
    // once initialized; kept until zeroAfter (2 h by default) they held their memory past max-scale.
    const ready = replica("r", "ready");
    const s1 = replica("s1", "asleep-1", { asleepSince: now - 2_000 });
    const s2 = replica("s2", "asleep-2", { asleepSince: now - 1_000 });
    expect(kinds(decideReplicas(input([ready, s1, s2], { maxReplicas: 1 })))).toEqual(["stop s2,s1 to 1"]);
    // Only the excess: at maxReplicas 2 one sleeper stays (and goes at zeroAfter as before).
    const two = decideReplicas(input([ready, s1, s2], { maxReplicas: 2 }));
    expect(kinds(two)).toEqual(["stop s2 to 2"]);
    // The awake ones above the bound sleep first (drain, then sleep), then go.
    const awake = [replica("a", "ready"), replica("b", "ready"), replica("c", "ready")];
    expect(kinds(decideReplicas(input(awake, { maxReplicas: 1 })))).toEqual([
      "drain-and-sleep a",
      "drain-and-sleep b",
    ]);
    // Still a pod starting: the ReplicaSet would take it instead, so the scale-down waits.
    const starting = replica("new", "starting", { podReady: false });
    const waiting = decideReplicas(input([ready, s1, starting], { maxReplicas: 1 }));
    expect(waiting.actions.filter((a) => a.kind === "stop")).toEqual([]);
    // A sleeper a held request waits for alone (its stored response) stays.
    const pinned = decideReplicas(input([ready, s1], { maxReplicas: 1, held: 1, pinnedTo: ["s1"] }));
    expect(pinned.actions.filter((a) => a.kind === "stop")).toEqual([]);
  });

  test("the pod floor on a manual clock: ready, asleep at sleepAfter, kept past zeroAfter, woken by a request", () => {
    let t = now;
    let pod = replica("p", "ready", { since: t, asleepSince: 0 });
    const step = (extra: Partial<HorizontalInput> = {}) =>
      decideReplicas(input([pod], { minPods: 1, lastActive: now, now: t, ...extra }));
    expect(step().nextAt).toBe(now + settings.sleepAfter);
    t = now + settings.sleepAfter;
    expect(kinds(step())).toEqual(["drain-and-sleep p"]);
    pod = { ...pod, tier: "asleep-1", since: t, asleepSince: t };
    expect(step().nextAt).toBe(t + settings.deepSleepAfter);
    t += settings.deepSleepAfter;
    expect(kinds(step())).toEqual(["deepen p"]);
    pod = { ...pod, tier: "asleep-2", since: t };
    t = pod.asleepSince + settings.zeroAfter + 1;
    expect(step().actions).toEqual([]);
    // Without the floor that pod would go to zero now.
    expect(kinds(step({ minPods: 0 }))).toEqual(["stop p to 0"]);
    expect(kinds(step({ held: 1 }))).toEqual(["wake p"]);
  });

  test("a pod missing below minPods is started, within maxReplicas, a slot's cap, back-off and a person's stop", () => {
    expect(kinds(decideReplicas(input([], { minPods: 2, workloadReplicas: 0 })))).toEqual(["scale-up to 2"]);
    const one = [replica("s", "asleep-1")];
    expect(kinds(decideReplicas(input(one, { minPods: 2 })))).toEqual(["scale-up to 2"]);
    // A pod the workload asked for counts; a held request's start counts too.
    expect(decideReplicas(input(one, { minPods: 2, pendingPods: 1, workloadReplicas: 2 })).actions).toEqual(
      [],
    );
    expect(kinds(decideReplicas(input([], { minPods: 1, held: 1, workloadReplicas: 0 })))).toEqual([
      "scale-up to 1",
    ]);
    expect(kinds(decideReplicas(input([], { minPods: 3, maxReplicas: 2, workloadReplicas: 0 })))).toEqual([
      "scale-up to 2",
    ]);
    expect(decideReplicas(input([], { minPods: 1, cap: 0, workloadReplicas: 0 })).actions).toEqual([]);
    expect(decideReplicas(input([], { minPods: 1, parked: true, workloadReplicas: 0 })).actions).toEqual([]);
    const backoff = decideReplicas(input([], { minPods: 1, backoffUntil: now + 5_000, workloadReplicas: 0 }));
    expect(backoff.actions).toEqual([]);
    expect(backoff.nextAt).toBe(now + 5_000);
  });

  test("without sleep support the pod floor keeps pods awake", () => {
    const plan = decideReplicas(
      input([replica("r", "ready", { since: now - 90_000 })], {
        lastActive: now - 100_000,
        minPods: 1,
        settings: { ...settings, sleep: false },
      }),
    );
    expect(plan.actions).toEqual([]);
    expect(plan.target).toBe(1);
  });

  test("a Ready pod still starting is warmed up; one past startTimeout failed", () => {
    const plan = decideReplicas(
      input([
        replica("up", "starting"),
        replica("stuck", "starting", { podReady: false, since: now - 400_000 }),
      ]),
    );
    expect(kinds(plan)).toEqual(["finish-start up", "start-failed stuck"]);
  });

  test("a starting pod the platform says cannot come up failed at once, with its reason; only a starting one", () => {
    const reason = 'ImagePullBackOff: Back-off pulling image "registry.invalid/vllm:1"';
    const plan = decideReplicas(
      input(
        [
          // Seconds into a start of minutes: startTimeout is far away.
          replica("pull", "starting", { podReady: false, since: now - 2_000, failing: reason }),
          replica("loading", "starting", { podReady: false, since: now - 2_000 }),
          // Busy (an operation runs on it): left to that operation, as a timed-out one is.
          replica("busy", "starting", { podReady: false, busy: true, failing: "CrashLoopBackOff" }),
        ],
        { held: 1 },
      ),
    );
    expect(plan.actions).toEqual([{ kind: "start-failed", pod: "pull", reason }]);
    // The one still loading is looked at again at its startTimeout.
    expect(plan.nextAt).toBe(now - 2_000 + settings.startTimeout);
    // The same input twice, the same plan: a pure function of its input.
    expect(
      decideReplicas(
        input([replica("pull", "starting", { podReady: false, since: now - 2_000, failing: reason })]),
      ).actions,
    ).toEqual([{ kind: "start-failed", pod: "pull", reason }]);
  });

  test("a start that failed already (its pod still there) fails again only for a request held once the back-off is over", () => {
    const reason = 'ImagePullBackOff: Back-off pulling image "registry.invalid/vllm:1"';
    const failed = replica("pull", "starting", {
      podReady: false,
      since: now - 20 * 60_000,
      failing: reason,
      startFailed: true,
    });
    // Nothing held: nothing to tell, whatever the time (also past startTimeout).
    expect(decideReplicas(input([failed], { held: 0 })).actions).toEqual([]);
    // Held during the back-off: looked at again when it ends.
    const during = decideReplicas(input([failed], { held: 2, backoffUntil: now + 4_000 }));
    expect(during.actions).toEqual([]);
    expect(during.nextAt).toBe(now + 4_000);
    // Held after it: failed again, with the reason (one past startTimeout, without one).
    expect(decideReplicas(input([failed], { held: 2, backoffUntil: now })).actions).toEqual([
      { kind: "start-failed", pod: "pull", reason },
    ]);
    const timedOut = replica("slow", "starting", {
      podReady: false,
      since: now - 20 * 60_000,
      startFailed: true,
    });
    expect(decideReplicas(input([timedOut], { held: 1 })).actions).toEqual([
      { kind: "start-failed", pod: "slow" },
    ]);
  });

  test("a start that failed on a platform that keeps such pods: kept until startTimeout, then failed again (and removed); one that came up goes on", () => {
    const reason = 'ImagePullBackOff: Back-off pulling image "registry.invalid/vllm:1"';
    const kept = (since: number, extra: Partial<ReplicaView> = {}) =>
      replica("pull", "starting", { podReady: false, since, failing: reason, startFailed: true, ...extra });
    const keep = { keepFailedStarts: true, held: 0 };
    // Within startTimeout, nothing held: nothing to do, looked at again at its startTimeout.
    const within = decideReplicas(input([kept(now - 60_000)], keep));
    expect(within.actions).toEqual([]);
    expect(within.nextAt).toBe(now - 60_000 + settings.startTimeout);
    // At its startTimeout: failed again, which (kept no longer) removes it.
    expect(decideReplicas(input([kept(now - settings.startTimeout)], keep)).actions).toEqual([
      { kind: "start-failed", pod: "pull", reason },
    ]);
    // It came up after all (the image pushed): its start goes on, kept or not.
    for (const extra of [keep, {}])
      expect(
        decideReplicas(input([kept(now - 60_000, { podReady: true, failing: undefined })], extra)).actions,
      ).toEqual([{ kind: "finish-start", pod: "pull" }]);
  });

  test("a kept pod goes past Knative's progress deadline (and a margin for Knative's verdict) when that is sooner than startTimeout", () => {
    // Found in review: with `progress-deadline: 2m` and startTimeout 30m the pod was kept 28
    // minutes after Knative had failed its revision, holding its node's GPU.
    const reason = 'ImagePullBackOff: Back-off pulling image "registry.invalid/vllm:1"';
    const kept = (since: number) =>
      replica("pull", "starting", { podReady: false, since, failing: reason, startFailed: true });
    const deadline = 60_000;
    const keep = { keepFailedStarts: true, held: 0, progressDeadline: deadline };
    const goes = deadline + progressDeadlineMargin;
    expect(keptFor(settings.startTimeout, deadline)).toBe(goes);
    const within = decideReplicas(input([kept(now - goes + 1)], keep));
    expect(within.actions).toEqual([]);
    expect(within.nextAt).toBe(now + 1);
    expect(decideReplicas(input([kept(now - goes)], keep)).actions).toEqual([
      { kind: "start-failed", pod: "pull", reason },
    ]);
    // A deadline past startTimeout changes nothing: startTimeout still ends it.
    const later = { ...keep, progressDeadline: settings.startTimeout };
    expect(keptFor(settings.startTimeout, settings.startTimeout)).toBe(settings.startTimeout);
    expect(decideReplicas(input([kept(now - goes)], later)).nextAt).toBe(now - goes + settings.startTimeout);
    // Not kept at all: the deadline is not read (the pod already went when its start failed).
    expect(
      decideReplicas(input([kept(now - goes)], { held: 0, progressDeadline: deadline })).actions,
    ).toEqual([]);
  });

  test("in a slot, a crash during the start is left to startTimeout (another member may hold the GPU's memory); an image that cannot be pulled fails at once", () => {
    const crash =
      "CrashLoopBackOff: back-off 10s restarting failed container; last exited with code 1 (Error)";
    const pull = 'ImagePullBackOff: Back-off pulling image "registry.invalid/vllm:1"';
    const starting = (pod: string, failing: string, crashed?: boolean) =>
      replica(pod, "starting", {
        podReady: false,
        since: now - 2_000,
        failing,
        ...(crashed ? { crashed } : {}),
      });
    const replicas = [starting("crash", crash, true), starting("pull", pull)];
    for (const slot of [{ inSlot: true }, { inSlot: true, cap: 0 }, { cap: 1 }]) {
      const plan = decideReplicas(input(replicas, { held: 1, ...slot }));
      expect(plan.actions.filter((a) => a.kind === "start-failed")).toEqual([
        { kind: "start-failed", pod: "pull", reason: pull },
      ]);
      expect(plan.nextAt).toBe(now - 2_000 + settings.startTimeout);
    }
    // Outside a slot a crash fails at once too.
    expect(decideReplicas(input(replicas, { held: 1 })).actions).toEqual([
      { kind: "start-failed", pod: "crash", reason: crash },
      { kind: "start-failed", pod: "pull", reason: pull },
    ]);
  });

  test("a failing reason on a replica that is not starting changes nothing (an awake or sleeping pod's restart is the controller's)", () => {
    const failing = "CrashLoopBackOff: back-off 10s restarting failed container";
    const plain = decideReplicas(input([replica("r", "ready"), replica("s", "asleep-1")]));
    const marked = decideReplicas(
      input([replica("r", "ready", { failing }), replica("s", "asleep-1", { failing })]),
    );
    expect(marked).toEqual(plain);
  });

  test("back-off delays activation and says when it ends", () => {
    const plan = decideReplicas(input([replica("s", "asleep-1")], { held: 1, backoffUntil: now + 5_000 }));
    expect(plan.actions).toEqual([]);
    expect(plan.nextAt).toBe(now + 5_000);
  });

  describe("a replica held requests wait for alone (pinnedTo: a stored response's maker)", () => {
    test("is woken beside a ready replica, whatever the count asks, and counts in the target", () => {
      const replicas = [replica("a", "ready"), replica("b", "asleep-1"), replica("made-it", "asleep-2")];
      // Without the pin a ready replica is enough: nothing moves.
      expect(decideReplicas(input(replicas, { held: 1 })).actions).toEqual([]);
      const plan = decideReplicas(input(replicas, { held: 1, pinnedTo: ["made-it"] }));
      expect(kinds(plan)).toEqual(["wake made-it"]);
      expect(plan.target).toBe(2);
    });

    test("is the one woken when the count asks for one more, not the most recently asleep", () => {
      const plan = decideReplicas(
        input(
          [replica("b", "asleep-1", { since: now - 5 }), replica("made-it", "asleep-1", { since: now - 50 })],
          {
            held: 1,
            pinnedTo: ["made-it"],
          },
        ),
      );
      expect(kinds(plan)).toEqual(["wake made-it"]);
      expect(plan.target).toBe(1);
    });

    test("is taken back while it drains, and never chosen to drain", () => {
      const draining = decideReplicas(
        input([replica("a", "ready"), replica("made-it", "draining", { busy: true })], {
          held: 1,
          pinnedTo: ["made-it"],
        }),
      );
      expect(kinds(draining)).toEqual(["undrain made-it"]);
      // A count of 1 with two awake: the other one goes, though the pinned one is idler.
      const surplus = decideReplicas(
        input([replica("a", "ready", { load: 3 }), replica("made-it", "ready", { load: 0 })], {
          desired: 1,
          held: 1,
          inFlight: 3,
          pinnedTo: ["made-it"],
        }),
      );
      expect(kinds(surplus)).toEqual(["drain-and-sleep a"]);
    });

    test("waits for maxReplicas, a slot's cap, and the back-off", () => {
      const replicas = [replica("a", "ready"), replica("made-it", "asleep-1")];
      const pinned = { held: 1, pinnedTo: ["made-it"] };
      expect(decideReplicas(input(replicas, { ...pinned, maxReplicas: 1 })).actions).toEqual([]);
      expect(decideReplicas(input(replicas, { ...pinned, cap: 1 })).actions).toEqual([]);
      const backedOff = decideReplicas(input(replicas, { ...pinned, backoffUntil: now + 5_000 }));
      expect(backedOff.actions).toEqual([]);
      expect(backedOff.nextAt).toBe(now + 5_000);
    });

    test("property: every pinned replica asleep or draining is brought back when there is room, and none is drained", () => {
      const tierArb = fc.constantFrom(...podTiers);
      fc.assert(
        fc.property(
          fc.array(fc.record({ tier: tierArb, pinned: fc.boolean(), load: fc.nat(3) }), { maxLength: 6 }),
          fc.option(fc.nat(4), { nil: undefined }),
          fc.nat(3),
          (views, desired, held) => {
            const replicas = views.map((v, i) =>
              replica(`p${i}`, v.tier, { busy: v.tier === "draining", load: v.load }),
            );
            const pinnedTo = replicas.filter((_, i) => views[i]!.pinned).map((r) => r.pod);
            const plan = decideReplicas(
              input(replicas, { desired, held: held + 1, pinnedTo, maxReplicas: 10 }),
            );
            const moved = new Map(
              plan.actions.flatMap((a) => ("pod" in a ? [[a.pod, a.kind] as const] : [])),
            );
            for (const pod of pinnedTo) {
              const tier = replicas.find((r) => r.pod === pod)!.tier;
              if (tier === "draining") expect(moved.get(pod)).toBe("undrain");
              if (isAsleep(tier)) expect(moved.get(pod)).toBe("wake");
              expect(moved.get(pod)).not.toBe("drain-and-sleep");
            }
          },
        ),
        { numRuns: 1_000 },
      );
    });
  });

  test("a slot cap of zero sleeps a resident and never wakes one, whatever the demand", () => {
    const plan = decideReplicas(
      input([replica("r", "ready"), replica("s", "asleep-1")], { held: 5, cap: 0, desired: 2 }),
    );
    expect(kinds(plan)).toEqual(["drain-and-sleep r"]);
  });

  test("property: never wakes or starts beyond the target (or the pod floor), never sleeps below it or stops below the floor, never touches a busy replica", () => {
    const tierArb = fc.constantFrom(...podTiers);
    const replicaArb = fc.record({
      tier: tierArb,
      busy: fc.boolean(),
      podReady: fc.boolean(),
      load: fc.nat(5),
      age: fc.nat(5_000_000),
    });
    fc.assert(
      fc.property(
        fc.array(replicaArb, { maxLength: 6 }),
        fc.record({
          desired: fc.option(fc.nat(8), { nil: undefined }),
          held: fc.nat(3),
          inFlight: fc.nat(3),
          min: fc.nat(2),
          minPods: fc.nat(3),
          extraMax: fc.nat(4),
          pending: fc.nat(2),
          cap: fc.option(fc.constantFrom(0, 1), { nil: undefined }),
          idleFor: fc.nat(200_000),
        }),
        (views, p) => {
          const replicas = views.map((v, i) =>
            replica(`p${i}`, v.tier, {
              busy: v.busy || v.tier === "draining",
              podReady: v.podReady,
              load: v.load,
              since: now - v.age,
              asleepSince: now - v.age,
            }),
          );
          const plan = decideReplicas(
            input(replicas, {
              desired: p.desired,
              held: p.held,
              inFlight: p.inFlight,
              minReplicas: p.min,
              minPods: p.minPods,
              maxReplicas: p.min + p.extraMax + 1,
              pendingPods: p.pending,
              workloadReplicas: replicas.length + p.pending,
              cap: p.cap,
              lastActive: now - p.idleFor,
            }),
          );
          const byPod = new Map(replicas.map((r) => [r.pod, r]));
          let added = 0;
          let removed = 0;
          let stopped = 0;
          for (const a of plan.actions) {
            if (a.kind === "scale-up") added += a.to - (replicas.length + p.pending);
            if (a.kind === "wake" || a.kind === "undrain") added++;
            if (a.kind === "drain-and-sleep" || a.kind === "drain-and-stop") removed++;
            if (a.kind === "stop") stopped += a.pods.length;
            if ("pod" in a && a.kind !== "undrain") expect(byPod.get(a.pod)!.busy).toBe(false);
            if (a.kind === "wake") expect(isAsleep(byPod.get(a.pod)!.tier)).toBe(true);
          }
          // Beyond the target only pods missing below the floor start; no stop goes below it.
          const pods = replicas.length + p.pending;
          expect(plan.awake + added).toBeLessThanOrEqual(
            Math.max(plan.target, plan.awake) + Math.max(0, p.minPods - pods),
          );
          if (stopped > 0) expect(pods - stopped).toBeGreaterThanOrEqual(p.minPods);
          if (removed > 0) expect(plan.awake - removed).toBeGreaterThanOrEqual(plan.target);
          if (p.cap === 0) expect(added).toBe(0);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
