import { isAsleep, isWarming, type Tier } from "../lib/replica-event.ts";
import { decideTier, type LadderSettings } from "./ladder.ts";

/**
 * How many replicas of one model should be awake, and which ones move, as a pure function of the
 * replicas' tiers, the model's load, the desired count and the clock. Awake capacity is added the
 * cheap way first: a draining replica is taken back, then sleeping replicas are woken (seconds),
 * and only the rest is started as new pods (minutes). Capacity is removed the gentle way: the
 * idlest awake replicas drain and sleep. Each replica still follows the tier ladder (`decideTier`)
 * for its idle clock, deeper sleep and scale to zero.
 */
export interface ReplicaView {
  pod: string;
  tier: Tier;
  /** When it entered its tier (epoch ms). */
  since: number;
  /** When it fell asleep, at either level. */
  asleepSince: number;
  /** The kubelet's Ready condition. */
  podReady: boolean;
  /** An operation on it is running: no new one starts. */
  busy: boolean;
  /** Requests the engine runs and queues, when known: the idlest goes to sleep first. */
  load: number;
  /** The platform knows it cannot come up as it is, and why (an image that cannot be pulled, a crash loop). */
  failing?: string;
  /** With `failing`: the engine itself exited (a crash), which in a slot may be another member's doing. */
  crashed?: boolean;
  /**
   * Its start failed already and the pod is still there (a Knative revision's pod, which Snooze
   * cannot scale away or keeps, see `keepFailedStarts`, or one whose removal is under way): failed
   * again only for requests held once the back-off is over, not on every pass; its start goes on
   * if it comes up after all.
   */
  startFailed?: boolean;
}

export interface HorizontalInput {
  replicas: ReplicaView[];
  /** Pods the workload asked for that do not exist yet: they count as starting. */
  pendingPods: number;
  /** The workload's replica count (its scale subresource). */
  workloadReplicas: number;
  /**
   * `spec.replicas` of the Model (a person, HPA or KEDA): awake replicas wanted; undefined: on
   * demand. Demand still keeps one awake beside it (see `decideReplicas`).
   */
  desired?: number;
  /** A person put the model to sleep (or stopped it): nothing awake until the next held request. */
  parked?: boolean;
  minReplicas: number;
  /**
   * Pods kept whatever the idle time, awake or asleep (Knative's `min-scale`): the ladder stops
   * only the pods above it, and a missing one is started (it sleeps once idle, like any pod).
   */
  minPods: number;
  maxReplicas: number;
  /**
   * Requests one replica takes at once (the model's `concurrency`; 0: unlimited). Without a count
   * asking for more, the requests held and in flight beyond what the awake replicas take start or
   * wake more replicas, up to maxReplicas, as Knative's autoscaler does for its revisions.
   */
  concurrency: number;
  inFlight: number;
  held: number;
  /**
   * Replicas some held requests may go to alone: the replica that made a stored response (the
   * Responses API's retrieve, cancel, `previous_response_id`) keeps it in its engine's memory.
   */
  pinnedTo?: readonly string[];
  /**
   * The burst the held queue last released, still running (`burstInFlight`): once nothing is held,
   * a lowered count waits for these requests, not for ones that came after the queue emptied.
   */
  burst: number;
  lastActive: number;
  now: number;
  /** No activation before this moment (back-off after failures). */
  backoffUntil: number;
  /** A slot's limit on awake replicas: 0 while the model may not hold its slot. */
  cap?: number;
  /** The model shares a slot (an accelerator) with other models. */
  inSlot?: boolean;
  /**
   * A pod whose start failed stays until its startTimeout rather than being scaled away at once
   * (held requests are still told at once): a Knative revision's pod before the revision reached
   * its initial scale, since Knative marks such a revision failed as soon as its PodAutoscaler is
   * not Ready, whereas the kubelet may yet start the pod (the image pushed, the Secret created), and
   * past Knative's progress deadline its revision reconciler reports the kubelet's reason itself.
   */
  keepFailedStarts?: boolean;
  /**
   * With `keepFailedStarts`: the revision's progress deadline in ms (its Deployment's
   * `progressDeadlineSeconds`, which Knative sets from the revision's
   * `serving.knative.dev/progress-deadline`, else `config-deployment`'s `progress-deadline`). Past
   * it Knative has judged the revision, so the pod is kept no longer (see `keptFor`).
   */
  progressDeadline?: number;
  settings: LadderSettings & { startTimeout: number };
}

/**
 * Past a revision's progress deadline, how long Knative gets to judge it before a kept pod goes:
 * the revision reconciler reads the pod's reason only while the pod is there, once the Deployment
 * says its progress deadline was exceeded. Knative's own KPA waits as long before it scales a
 * revision stuck activating to zero (its `activationTimeoutBuffer`, for the same reason).
 */
export const progressDeadlineMargin = 30_000;

/**
 * How long a pod whose start failed is kept (`keepFailedStarts`), from its start: its startTimeout,
 * or its progress deadline and `progressDeadlineMargin` when that is sooner (Knative has judged the
 * revision by then, and a pod kept longer only holds its node's accelerator).
 */
export function keptFor(startTimeout: number, progressDeadline?: number): number {
  return progressDeadline === undefined
    ? startTimeout
    : Math.min(startTimeout, progressDeadline + progressDeadlineMargin);
}

export type ReplicaAction =
  /** The pod is up (Ready): warm it up and route to it. */
  | { kind: "finish-start"; pod: string }
  | { kind: "wake"; pod: string; level: 1 | 2 }
  | { kind: "undrain"; pod: string }
  | { kind: "drain-and-sleep"; pod: string; level: 1 | 2 }
  | { kind: "drain-and-stop"; pod: string }
  | { kind: "deepen"; pod: string }
  /**
   * The pod did not come up within startTimeout, or (with `reason`) the platform says it cannot
   * come up as it is: it failed at once, not at startTimeout.
   */
  | { kind: "start-failed"; pod: string; reason?: string }
  /** Scale the workload up: new pods start. */
  | { kind: "scale-up"; to: number }
  /** Scale the workload down, removing these pods (lowest deletion cost). */
  | { kind: "stop"; pods: string[]; to: number };

export interface HorizontalPlan {
  actions: ReplicaAction[];
  /** Awake replicas wanted (ready + warming). */
  target: number;
  /** Awake now (ready + warming, pending pods included). */
  awake: number;
  /** Look again at this moment even if nothing changes (Infinity: only on the next event). */
  nextAt: number;
}

/**
 * The requests of the last burst still running, after a pass that saw `load`: while requests are
 * held, all of them (held and in flight); once the queue is empty, the fewest in flight seen since,
 * so requests that came after it do not count. Zero once the burst is done.
 */
export function burstInFlight(previous: number, load: { held: number; inFlight: number }): number {
  return load.held > 0 ? load.held + load.inFlight : Math.min(previous, load.inFlight);
}

export function decideReplicas(input: HorizontalInput): HorizontalPlan {
  const { replicas, now, settings } = input;
  // Without sleep a kept pod can only be kept awake: the pod floor is an awake floor then.
  const minReplicas = settings.sleep ? input.minReplicas : Math.max(input.minReplicas, input.minPods);
  const actions: ReplicaAction[] = [];
  let nextAt = Number.POSITIVE_INFINITY;
  const later = (at: number) => {
    if (at > now) nextAt = Math.min(nextAt, at);
  };
  const free = (r: ReplicaView) => !r.busy;

  // Pods coming up: once Ready they are warmed up; past startTimeout they failed, and so did one
  // the platform says cannot come up as it is (its image cannot be pulled, its engine crash-loops).
  // Not a slot member's crash: another member may hold the accelerator's memory (a pod Knative
  // made outside the slot's turns), and the engine comes up once the slot is its own.
  const inSlot = input.inSlot === true || input.cap !== undefined;
  for (const r of replicas.filter((r) => r.tier === "starting" && free(r))) {
    // Failed once: each failure writes the Model's status, and the write's own event brings the
    // next pass, so failing it on every pass would loop. Requests held later are told once the
    // back-off (which each failure lengthens) is over; until then the activator tells them itself.
    if (r.startFailed) {
      // It came up after all (the kubelet pulled the image once it was pushed, say): it goes on.
      if (r.podReady && r.failing === undefined) {
        actions.push({ kind: "finish-start", pod: r.pod });
        continue;
      }
      const failedAgain = {
        kind: "start-failed",
        pod: r.pod,
        ...(r.failing ? { reason: r.failing } : {}),
      } as const;
      // Kept (keepFailedStarts) until its startTimeout, or sooner past Knative's progress deadline
      // (keptFor): then it fails for good and goes.
      const keep = keptFor(settings.startTimeout, input.progressDeadline);
      if (input.keepFailedStarts && now - r.since >= keep) actions.push(failedAgain);
      else if (input.held > 0 && now >= input.backoffUntil) actions.push(failedAgain);
      else {
        if (input.held > 0) later(input.backoffUntil);
        if (input.keepFailedStarts) later(r.since + keep);
      }
      continue;
    }
    if (r.failing !== undefined && !r.podReady && !(r.crashed && inSlot))
      actions.push({ kind: "start-failed", pod: r.pod, reason: r.failing });
    // startTimeout counts for a replica that is up but keeps failing its checks (health, warm-up) too.
    else if (now - r.since >= settings.startTimeout) actions.push({ kind: "start-failed", pod: r.pod });
    else {
      if (r.podReady) actions.push({ kind: "finish-start", pod: r.pod });
      later(r.since + settings.startTimeout);
    }
  }

  const ready = replicas.filter((r) => r.tier === "ready");
  const awake = replicas.filter((r) => r.tier === "ready" || isWarming(r.tier)).length + input.pendingPods;
  const ladder = (
    r: ReplicaView,
    held: number,
    inFlight: number,
    ladderSettings: LadderSettings = settings,
  ) =>
    decideTier(
      {
        tier: r.tier,
        since: r.since,
        asleepSince: r.asleepSince,
        inFlight,
        held,
        lastActive: input.lastActive,
        now,
        backoffUntil: input.backoffUntil,
      },
      ladderSettings,
    );

  // How many awake: on demand, every ready replica stays until the model was idle `sleepAfter`
  // (the ladder); with an external count (`desired`), that many stay and demand keeps one more
  // only when the count is below one: a held request wakes one, and the replica that served it
  // stays awake until the model was idle `sleepAfter`, as without a count. So KEDA's 0 ("all
  // asleep") never makes a woken replica sleep between two requests a second apart. A count of 1
  // or more asks for nothing beyond itself, and is obeyed as it is once no request of a burst is
  // held or running: an HPA's scale-down drains the surplus even with requests in flight (they
  // finish on the draining replicas). While a burst's requests are held or running, it does not
  // take away the awake and warming replicas they fill (below). minReplicas and maxReplicas, the Model's own bounds, hold either way; a slot's
  // cap above all. minPods is not an awake count: it only keeps pods from being stopped (below).
  let target: number;
  if (input.cap === 0) target = 0;
  else {
    let onDemand = awake - ready.length;
    for (const r of ready) {
      const action = ladder(r, input.held, input.inFlight);
      if (action.kind === "wait") {
        onDemand++;
        later(action.at);
      }
    }
    if (input.parked) target = 0;
    else if (input.desired !== undefined)
      target = Math.max(input.desired, Math.min(onDemand, 1), minReplicas);
    else target = Math.max(onDemand, minReplicas);
    if (input.held > 0) target = Math.max(target, 1);
    // No count (or KEDA's 0): demand itself asks for the replicas its requests need. A count of 1
    // or more is an HPA's or a person's: demand asks for nothing beyond it (only keeps, below).
    if (!input.parked && (input.desired === undefined || input.desired === 0) && input.concurrency > 0)
      target = Math.max(target, Math.ceil((input.held + input.inFlight) / input.concurrency));
    // A count lowered below the capacity requests wait for does not give it up while they wait or
    // run: with a request held, the awake and warming replicas (never more) that the held and
    // in-flight requests fill stay, as the demand metric's floor keeps them in what it tells HPA and
    // KEDA; once the queue is empty, those that the burst it released still fills stay, each
    // released as its requests finish. KEDA's activation writes 1 from zero whatever the load (its
    // HPA scales on from there), so without this the replicas Snooze had woken or started for a
    // burst drained at once and came back at the HPA's next sync (found by an outside tester with
    // real KEDA; the queue emptying before the HPA's first count did the same, seen in e2e).
    // status.replicas keeps counting them, so the HPA converges on them; requests that came after
    // the queue emptied keep nothing, so a count is never fought longer than the burst lasts, and
    // this never starts or wakes a replica.
    const waiting = input.held > 0 ? input.held + input.inFlight : Math.min(input.burst, input.inFlight);
    if (!input.parked && waiting > 0 && input.concurrency > 0)
      target = Math.max(target, Math.min(awake, Math.ceil(waiting / input.concurrency)));
    target = Math.min(target, input.maxReplicas);
    if (input.cap !== undefined) target = Math.min(target, input.cap);
  }

  const pinned = new Set(input.pinnedTo);
  const pinnedFirst = (a: ReplicaView, b: ReplicaView) =>
    Number(pinned.has(b.pod)) - Number(pinned.has(a.pod));
  const waking = new Set<string>();
  const undrained = new Set<string>();
  const mayActivate = now >= input.backoffUntil;
  let drained = 0;
  let scaleTo = input.workloadReplicas;
  if (awake < target) {
    let short = target - awake;
    // The replicas held requests wait for alone come back first (see pinnedTo).
    for (const r of replicas.filter((r) => r.tier === "draining").sort(pinnedFirst)) {
      if (short === 0) break;
      actions.push({ kind: "undrain", pod: r.pod });
      undrained.add(r.pod);
      short--;
    }
    if (!mayActivate && short > 0) later(input.backoffUntil);
    // Level 1 wakes fastest (weights in host RAM), then level 2; the most recently asleep first.
    const sleepers = replicas
      .filter((r) => isAsleep(r.tier) && free(r))
      .sort((a, b) => (a.tier === b.tier ? b.since - a.since : a.tier === "asleep-1" ? -1 : 1))
      .sort(pinnedFirst);
    for (const r of sleepers) {
      if (short === 0 || !mayActivate) break;
      actions.push({ kind: "wake", pod: r.pod, level: r.tier === "asleep-2" ? 2 : 1 });
      waking.add(r.pod);
      short--;
    }
    if (short > 0 && mayActivate) scaleTo = Math.min(input.workloadReplicas + short, input.maxReplicas);
  } else if (awake > target) {
    // The idlest awake replicas leave first; warming ones finish their activation before anything,
    // and one that held requests wait for alone stays.
    let excess = awake - target;
    const candidates = ready
      .filter((r) => free(r) && !pinned.has(r.pod))
      .sort((a, b) => a.load - b.load || a.since - b.since);
    for (const r of candidates) {
      if (excess === 0) break;
      actions.push(
        settings.sleep
          ? { kind: "drain-and-sleep", pod: r.pod, level: settings.sleepLevel }
          : { kind: "drain-and-stop", pod: r.pod },
      );
      drained++;
      excess--;
    }
  }
  // A request held for one replica alone is served by that replica or by none: each such replica
  // not awake yet is taken back or woken whatever the count asks (another awake replica is no use
  // to it), within maxReplicas and a slot's cap. Before, a retrieve of a response whose maker slept
  // beside a ready replica waited out its hold budget: only a count asking for more woke anyone.
  if (pinned.size > 0 && !input.parked && input.cap !== 0) {
    const room = Math.min(input.maxReplicas, input.cap ?? Number.POSITIVE_INFINITY);
    let awakeAfter = awake + undrained.size + waking.size - drained;
    for (const r of replicas) {
      if (!pinned.has(r.pod) || undrained.has(r.pod) || waking.has(r.pod) || awakeAfter >= room) continue;
      if (r.tier === "draining") {
        actions.push({ kind: "undrain", pod: r.pod });
        undrained.add(r.pod);
      } else if (isAsleep(r.tier) && free(r) && mayActivate) {
        actions.push({ kind: "wake", pod: r.pod, level: r.tier === "asleep-2" ? 2 : 1 });
        waking.add(r.pod);
      } else {
        if (isAsleep(r.tier) && !mayActivate) later(input.backoffUntil);
        continue;
      }
      awakeAfter++;
      target++;
    }
  }

  // A replica left draining with nothing under way on it, and not taken back above: the sleep or stop
  // that followed its drain did not happen (a scale-down the platform refused). It is released
  // again; left as it was, its engine stayed awake for good with no activator routing to it.
  for (const r of replicas) {
    if (r.tier !== "draining" || !free(r) || undrained.has(r.pod)) continue;
    actions.push(
      settings.sleep
        ? { kind: "drain-and-sleep", pod: r.pod, level: settings.sleepLevel }
        : { kind: "drain-and-stop", pod: r.pod },
    );
  }

  // The pod floor: a pod missing below minPods starts (a slot's cap and back-off permitting, not
  // while a person parked the model); it is awake while it starts and sleeps once idle.
  const pods = replicas.filter((r) => r.tier !== "cold").length + input.pendingPods;
  const missing = input.minPods - (pods + scaleTo - input.workloadReplicas);
  if (missing > 0 && !input.parked && input.cap !== 0) {
    if (now < input.backoffUntil) later(input.backoffUntil);
    else {
      // In a slot, a starting pod is resident: no more of them than the cap leaves room for.
      const room = input.cap === undefined ? missing : input.cap - Math.max(awake, target);
      if (room > 0) scaleTo = Math.min(scaleTo + Math.min(missing, room), input.maxReplicas);
    }
  }
  if (scaleTo > input.workloadReplicas) actions.push({ kind: "scale-up", to: scaleTo });

  // Sleepers follow the ladder: deeper sleep, then zero, but never below the pod floor: the ones
  // stopped are the deepest and longest asleep; the ones kept (those a request wakes first)
  // follow the ladder without its zero step.
  // Pods above maxReplicas (Knative's initial-scale above its max-scale starts them, a lowered
  // max-scale leaves them) go as soon as they sleep, not after zeroAfter: the KPA scales a revision
  // down to its max-scale once it is initialized. The awake ones among them sleep first (above).
  const deepestFirst = (a: ReplicaView, b: ReplicaView) =>
    a.tier === b.tier ? a.asleepSince - b.asleepSince : a.tier === "asleep-2" ? -1 : 1;
  const due: ReplicaView[] = [];
  const notDue: ReplicaView[] = [];
  const follow = (r: ReplicaView, action: ReturnType<typeof ladder>) => {
    if (action.kind === "deepen") actions.push({ kind: "deepen", pod: r.pod });
    else if (action.kind === "wait") later(action.at);
  };
  for (const r of replicas.filter((r) => isAsleep(r.tier) && free(r) && !waking.has(r.pod)))
    (ladder(r, 0, 0).kind === "stop" ? due : notDue).push(r);
  due.sort(deepestFirst);
  notDue.sort(deepestFirst);
  const stoppingViews = due.slice(0, Math.max(0, pods - input.minPods));
  const aboveMax = pods - Math.max(input.maxReplicas, input.minPods) - stoppingViews.length;
  // Not one a held request waits for alone (pinnedTo): it is the only one with its stored response.
  const overflow = notDue.filter((r) => !pinned.has(r.pod)).slice(0, Math.max(0, aboveMax));
  const overflowing = new Set(overflow);
  const stopping = [...stoppingViews, ...overflow].map((r) => r.pod);
  const keptSettings = { ...settings, zeroAfter: Number.POSITIVE_INFINITY };
  for (const r of due.slice(stoppingViews.length)) follow(r, ladder(r, 0, 0, keptSettings));
  for (const r of notDue) if (!overflowing.has(r)) follow(r, ladder(r, 0, 0));
  if (stopping.length > 0) {
    // The ReplicaSet removes pods that are not Ready before any deletion cost counts: scale down
    // only when every pod is up, or it would take a starting one instead of the sleeper.
    const allUp = input.pendingPods === 0 && replicas.every((r) => r.podReady);
    if (allUp) {
      actions.push({
        kind: "stop",
        pods: stopping,
        to: Math.max(0, input.workloadReplicas - stopping.length),
      });
    }
  }
  return { actions, target, awake, nextAt };
}
