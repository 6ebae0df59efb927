import { type Context, context, propagation } from "@opentelemetry/api";
import type { ControlPlane, DemandHint, LoadReport } from "../lib/control-plane.ts";
import {
  type AdminOutcome,
  type AdminVerb,
  adminPath,
  adminTimeoutMs,
  callerHeaders,
  type DemandBody,
  demandPath,
  nextLoadSeq,
  type PrewarmAsk,
  type StatsBody,
  slotsPath,
  statsPath,
} from "../lib/control-protocol.ts";
import { parseDuration } from "../lib/duration.ts";
import { aliasClaimant, assignAliases } from "../lib/kube/alias-holders.ts";
import { group, version } from "../lib/kube/api-group.ts";
import { type KubeClient, type KubeObject, paths } from "../lib/kube/client.ts";
import type { Informer } from "../lib/kube/informer.ts";
import { kubeInformer } from "../lib/kube/list-watch.ts";
import { type KubeModel, modelFromResource } from "../lib/kube/model-config.ts";
import { modelPrecedence } from "../lib/kube/model-precedence.ts";
import type { ModelResource } from "../lib/kube/model-resource.ts";
import { modelStatusTier } from "../lib/kube/model-status-tier.ts";
import { type Pod, replicaEventForPod } from "../lib/kube/pod-replica.ts";
import { selectorMatcher } from "../lib/kube/selector.ts";
import type { Logger } from "../lib/log.ts";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { renameMembers, type SlotStatus } from "../lib/slot-status.ts";
import { AdminActionUnfinished, SleepStoppedInstead } from "./admin.ts";

type Model = ModelResource & KubeObject;

export interface KubeControlPlaneOptions {
  client: KubeClient;
  /** The autoscaler Service (`http://snooze-autoscaler.snooze-system.svc:8090`). */
  autoscalerUrl: string;
  /** This activator's name in demand and stats (its pod name). */
  identity: string;
  /** Only this namespace's Models and pods; all when absent. */
  namespace?: string;
  log: Logger;
  informer?: { resyncMs?: number; staleMs?: number };
  /** A Model appeared or changed: the activator routes it from now on. */
  onModel(config: ModelConfig): void;
  /** A Model is gone (for longer than the grace). */
  onModelRemoved(id: string): void;
  /** A Model deleted and created again within this time (its workload's annotations changed) keeps its route. */
  removalGraceMs?: number;
}

interface Known {
  model: KubeModel;
  selector: string;
  matches: (labels?: Record<string, string>) => boolean;
  /** The activation failure last told to the activator, so each is told once. */
  failure?: { since: string; message: string; retryAt?: number };
  /** The tier its status said, last told while no pod of it was known (`modelStatusTier`). */
  statusTier?: Tier;
}

/** How often an autoscaler that cannot be reached is said again. */
const unreachableToldEveryMs = 60_000;

/**
 * The ControlPlane seam on Kubernetes, seen from an activator. Demand goes to the autoscaler over
 * HTTP at once; stats are batched into one request per turn (the activator reports every second
 * and whenever load goes to or from zero). Replica events come from a pod watch: each pod of a
 * Model (selected by the Model's `status.selector`) is a replica, its tier the `snooze.dev/tier`
 * annotation the autoscaler writes, routable only when that says ready and the pod's containers pass
 * their probe (`replicaEventForPod`).
 * Models come from a Model watch, so the activator learns models, aliases and settings at run
 * time, and knows on start which pods sleep before it takes a request. Every request to the
 * autoscaler carries this activator's ServiceAccount token (the KubeClient's), which the
 * autoscaler checks with a TokenReview.
 */
export class KubeControlPlane implements ControlPlane {
  private readonly options: KubeControlPlaneOptions;
  private readonly log: Logger;
  readonly models: Informer<Model>;
  readonly pods: Informer<Pod>;
  private readonly known = new Map<string, Known>();
  private readonly byId = new Map<string, string>();
  /** Models left out for another of the same id (`ignored serving`), each logged once. */
  private shadowed = new Set<string>();
  /** Which model each pod was last reported for, so a pod that leaves a model is reported gone. */
  private readonly podModel = new Map<string, string>();
  private readonly listeners = new Set<(event: ReplicaEvent) => void>();
  private readonly removals = new Map<string, NodeJS.Timeout>();
  private pendingStats = new Map<string, Omit<StatsBody["models"][number], "model">>();
  private flushScheduled = false;
  /** The last load report's stamp (`seq`). */
  private loadSeq = 0;
  /** The status the autoscaler last refused a report with, so a refusal is logged once. */
  private refusedWith?: number;
  /** While the autoscaler cannot be reached: when that was last said, and the failures since. */
  private unreachable?: { toldAt: number; since: number };
  /** Requests to the autoscaler that failed, for the state endpoint and tests. */
  readonly counts = { demands: 0, statsPosts: 0, failures: 0 };

  constructor(options: KubeControlPlaneOptions) {
    this.options = options;
    this.log = options.log;
    const common = { log: options.log, ...options.informer };
    this.models = kubeInformer<Model>(
      options.client,
      paths.custom(group, version, "models", options.namespace),
      { name: "models", ...common },
    );
    this.pods = kubeInformer<Pod>(options.client, paths.pods(options.namespace), { name: "pods", ...common });
  }

  /** Lists Models and pods (so the activator knows every replica's tier), then follows them. */
  async start(): Promise<void> {
    this.models.on({
      add: () => this.syncModels(),
      update: (m, old) => {
        if (m !== old) this.syncModels();
      },
      delete: () => this.syncModels(),
    });
    this.pods.on({
      add: (pod) => this.podChanged(pod),
      update: (pod, old) => {
        if (pod !== old) this.podChanged(pod);
      },
      delete: (pod) => this.podGone(pod),
    });
    await Promise.all([this.models.start(), this.pods.start()]);
    this.syncModels();
  }

  get synced(): boolean {
    return this.models.synced && this.pods.synced;
  }

  async stop(): Promise<void> {
    for (const timer of this.removals.values()) clearTimeout(timer);
    await Promise.all([this.models.stop(), this.pods.stop()]);
  }

  demand(model: string, hint?: DemandHint): void {
    this.counts.demands++;
    const load = hint?.load;
    const body: DemandBody = {
      activator: this.options.identity,
      model,
      unreachable: hint?.unreachable,
      ...(load
        ? {
            inFlight: load.inFlight,
            held: load.held,
            ...(load.oldestHeldMs !== undefined ? { oldestHeldMs: Math.round(load.oldestHeldMs) } : {}),
            ...(load.pinnedTo?.length ? { pinnedTo: [...load.pinnedTo] } : {}),
            seq: this.stamp(),
          }
        : {}),
    };
    // The held request's trace context goes along, so the activation it asks for joins its trace.
    const trace: Record<string, string> = {};
    propagation.inject(context.active(), trace);
    this.post(demandPath, body, trace);
  }

  /** The next load report's stamp (lib/control-protocol.ts nextLoadSeq). */
  private stamp(): number {
    this.loadSeq = nextLoadSeq(this.loadSeq);
    return this.loadSeq;
  }

  stats(model: string, { inFlight, held, oldestHeldMs, flow, routed, pinnedTo }: LoadReport): void {
    this.pendingStats.set(model, {
      inFlight,
      held,
      // Stamped now, when the load was seen, not when the batch is posted: a demand posted since
      // carries a newer load, and wins however the two posts race.
      seq: this.stamp(),
      ...(oldestHeldMs !== undefined ? { oldestHeldMs: Math.round(oldestHeldMs) } : {}),
      ...(flow
        ? { arrived: flow.arrived, completed: flow.completed, serviceMs: Math.round(flow.serviceMs) }
        : {}),
      ...(routed ? { routed: [...routed] } : {}),
      ...(pinnedTo?.length ? { pinnedTo: [...pinnedTo] } : {}),
    });
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const models = [...this.pendingStats].map(([id, load]) => ({ model: id, ...load }));
      this.pendingStats = new Map();
      if (models.length === 0) return;
      this.counts.statsPosts++;
      const body: StatsBody = { activator: this.options.identity, models };
      this.post(statsPath, body);
    });
  }

  watch(listener: (event: ReplicaEvent) => void): () => void {
    this.listeners.add(listener);
    for (const pod of this.pods.list()) {
      const known = this.modelOfPod(pod);
      if (known) listener(this.eventFor(known, pod));
    }
    return () => this.listeners.delete(listener);
  }

  /**
   * A person's wake, sleep or stop, carried out by the autoscaler that holds the model's Lease (the
   * autoscaler Service forwards it there). Resolves when it is done; rejects with the reason.
   */
  /** Asks the Model's leader; resolves with its answer (a prewarm's `keptMs`), rejects on a refusal. */
  async admin(
    model: string,
    verb: AdminVerb,
    prewarm?: PrewarmAsk,
    caller?: Context,
  ): Promise<Partial<AdminOutcome>> {
    // The trace of whoever asked (an incoming event's): the activation the leader begins joins it.
    const trace: Record<string, string> = {};
    if (caller) propagation.inject(caller, trace);
    const response = await fetch(`${this.options.autoscalerUrl}${adminPath(model, verb, prewarm)}`, {
      method: "POST",
      headers: await callerHeaders(this.options.client, trace),
      signal: AbortSignal.timeout(adminTimeoutMs),
    });
    const outcome = (await response.json().catch(() => ({}))) as Partial<AdminOutcome>;
    if (outcome.stoppedInstead === true) throw new SleepStoppedInstead(model, outcome.message);
    if (response.status === 504 && (verb === "sleep" || verb === "stop"))
      throw new AdminActionUnfinished(verb, model, outcome.tier ?? "awake", outcome.takenBack === true);
    if (!response.ok) throw new Error(outcome.message ?? `the autoscaler answered ${response.status}`);
    return outcome;
  }

  /**
   * Every slot's status, from the autoscalers that lead them, its members named by the model ids
   * this API lists models by (the autoscaler keys them `namespace/name`): `snooze wake` finds its
   * model among the waiting by its id (found in review: on Kubernetes it never did).
   */
  async slots(): Promise<SlotStatus[]> {
    const response = await fetch(`${this.options.autoscalerUrl}${slotsPath}`, {
      headers: await callerHeaders(this.options.client),
      signal: AbortSignal.timeout(5_000),
    });
    if (!response.ok) throw new Error(`the autoscaler answered ${response.status}`);
    const { slots } = (await response.json()) as { slots: SlotStatus[] };
    return slots.map((slot) => renameMembers(slot, (key) => this.known.get(key)?.model.config.id ?? key));
  }

  /** The model id of the Model `namespace/name`, when this activator routes it (Knative's splits name revisions, whose Models carry their names). */
  modelIdOf(namespace: string, name: string): string | undefined {
    return this.known.get(`${namespace}/${name}`)?.model.config.id;
  }

  /** The Model that serves the model id `id`, by namespace and name. */
  modelObjectOf(id: string): { namespace: string; name: string } | undefined {
    const key = this.byId.get(id);
    const model = key === undefined ? undefined : this.known.get(key)?.model;
    return model && { namespace: model.namespace, name: model.name };
  }

  /** Facts for the admin view: the last activation failure the autoscaler reported. */
  details(id: string): { lastError?: string } {
    const key = this.byId.get(id);
    const resource = key ? this.models.get(key) : undefined;
    const failed = resource?.status?.conditions?.find(
      (c) => c.type === "ActivationFailed" && c.status === "True",
    );
    return failed?.message ? { lastError: failed.message } : {};
  }

  private post(path: string, body: unknown, extra: Record<string, string> = {}): void {
    void callerHeaders(this.options.client, { "content-type": "application/json", ...extra })
      .then((headers) =>
        fetch(`${this.options.autoscalerUrl}${path}`, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(5_000),
        }),
      )
      .then(async (response) => {
        this.reached();
        if (response.ok) {
          await response.body?.cancel();
          this.refusedWith = undefined;
          return;
        }
        // Refused (401/403: this activator's token is not accepted): said once until it works again.
        this.counts.failures++;
        const text = await response.text().catch(() => "");
        if (this.refusedWith !== response.status)
          this.log.warn("the autoscaler refused a report", { path, status: response.status, answer: text });
        this.refusedWith = response.status;
      })
      .catch((error: unknown) => {
        // The next stats report (every second) carries held requests, so demand is not lost.
        this.counts.failures++;
        this.unreachableAgain(path, error);
      });
  }

  /**
   * A report that could not be made: said at once, then at most once a minute with how many failed
   * since (found by an outside tester: one line a second, and one per demand, for as long as the
   * autoscaler was down, an hour's outage 3600 lines saying the same).
   */
  private unreachableAgain(path: string, error: unknown): void {
    const now = Date.now();
    const was = this.unreachable;
    if (was && now - was.toldAt < unreachableToldEveryMs) {
      was.since++;
      return;
    }
    this.log.warn("could not reach the autoscaler", {
      path,
      error,
      ...(was && was.since > 0 ? { repeated: was.since } : {}),
    });
    this.unreachable = { toldAt: now, since: 0 };
  }

  /** The autoscaler answered: an outage that was said is said to be over. */
  private reached(): void {
    if (!this.unreachable) return;
    const { since } = this.unreachable;
    this.unreachable = undefined;
    this.log.info("the autoscaler answers again", since > 0 ? { repeated: since } : {});
  }

  private emit(event: ReplicaEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  private syncModels(): void {
    const seen = new Set<string>();
    // Oldest first: of Models serving one id, the oldest gets it (model-precedence.ts), decided
    // afresh each time, so a deleted owner's id goes to the next one at once.
    const owners = new Map<string, string>();
    const shadowed = new Set<string>();
    const byAge = this.models
      .list()
      .map((resource) => ({ resource, precedence: modelPrecedence(resource.metadata) }))
      .sort((a, b) => (a.precedence < b.precedence ? -1 : a.precedence > b.precedence ? 1 : 0));
    const parsedByAge = byAge.map(({ resource }) => ({ resource, parsed: modelFromResource(resource) }));
    // A model id is a Model's own name: it goes before another Model's alias of that name, and of
    // Models that list one alias, the oldest gets it (before, whichever the activator saw first);
    // the autoscaler says the same in the left-out Model's status (alias-holders.ts).
    const aliases = assignAliases(
      parsedByAge.flatMap(({ parsed }) => ("error" in parsed ? [] : [aliasClaimant(parsed)])),
    );
    for (const { resource, parsed } of parsedByAge) {
      if ("error" in parsed) continue;
      const owner = owners.get(parsed.config.id);
      if (owner !== undefined) {
        const told = `${parsed.key} ${owner}`;
        shadowed.add(told);
        if (!this.shadowed.has(told))
          this.log.warn("two Models serve the same model id; the oldest one gets its requests", {
            id: parsed.config.id,
            serving: owner,
            ignored: parsed.key,
          });
        continue;
      }
      owners.set(parsed.config.id, parsed.key);
      parsed.config.aliases = aliases.kept.get(parsed.key) ?? [];
      for (const { alias, holder, asId } of aliases.leftOut.get(parsed.key) ?? []) {
        const told = `alias ${alias} ${parsed.key}`;
        shadowed.add(told);
        if (!this.shadowed.has(told))
          this.log.warn("an alias another Model has first is left out", {
            alias,
            model: parsed.key,
            holder: asId ? `the model id ${alias} (${holder})` : holder,
          });
      }
      seen.add(parsed.key);
      const selector = resource.status?.selector ?? "";
      const before = this.known.get(parsed.key);
      const removal = this.removals.get(parsed.config.id);
      if (removal) {
        clearTimeout(removal);
        this.removals.delete(parsed.config.id);
      }
      if (before && before.model.config.id !== parsed.config.id) this.forget(parsed.key, before);
      const changed =
        !before ||
        before.model.config.id !== parsed.config.id ||
        JSON.stringify(before.model.config) !== JSON.stringify(parsed.config);
      const known: Known = {
        model: parsed,
        selector,
        matches: before?.selector === selector ? before.matches : selectorMatcher(selector),
        failure: before?.failure,
        statusTier: before?.statusTier,
      };
      this.known.set(parsed.key, known);
      this.byId.set(parsed.config.id, parsed.key);
      if (changed) this.options.onModel(parsed.config);
      if (changed || before?.selector !== selector || before.model.spec.port !== parsed.spec.port)
        for (const pod of this.pods.list()) this.podChanged(pod);
      this.reportFailure(known, resource);
      this.reportStatusTier(known, resource);
    }
    for (const [key, known] of [...this.known]) {
      if (seen.has(key)) continue;
      // Its id went to another Model (it was deleted, or an older one serves the id): its pods are
      // not that one's replicas, so they leave the id's route now, not with its route's removal.
      const handedOver = owners.has(known.model.config.id) ? this.podsReportedFor(key) : [];
      for (const pod of handedOver)
        this.emit({
          model: known.model.config.id,
          replica: pod.metadata.name,
          tier: "cold",
          since: Date.now(),
        });
      this.forget(key, known);
      for (const pod of handedOver) this.podChanged(pod);
    }
    this.shadowed = shadowed;
  }

  /** The pods last reported as replicas of the Model `key`. */
  private podsReportedFor(key: string): Pod[] {
    const pods: Pod[] = [];
    for (const [podKey, modelKey] of this.podModel) {
      const pod = modelKey === key ? this.pods.get(podKey) : undefined;
      if (pod) pods.push(pod);
    }
    return pods;
  }

  /** A Model is gone: its route goes after a grace, unless a Model with the same id comes back. */
  private forget(key: string, known: Known): void {
    this.known.delete(key);
    const id = known.model.config.id;
    if (this.byId.get(id) === key) this.byId.delete(id);
    for (const [pod, modelKey] of [...this.podModel]) if (modelKey === key) this.podModel.delete(pod);
    if (this.removals.has(id)) return;
    const timer = setTimeout(() => {
      this.removals.delete(id);
      if (!this.byId.has(id)) this.options.onModelRemoved(id);
    }, this.options.removalGraceMs ?? 5_000);
    timer.unref();
    this.removals.set(id, timer);
  }

  /**
   * What the Model's status says of failures, told once each: an activation failed (its
   * ActivationFailed condition turned True, or, while it stays True, its back-off `retryAt` moved
   * later: a failure again), so held requests hear why and requests that arrive before `retryAt`
   * hear it at once; or the back-off ended early (`retryAt` moved earlier: a reload changed the
   * engine, a person stopped the model; or the condition turned False).
   */
  private reportFailure(known: Known, resource: Model): void {
    const status = resource.status;
    const failed = status?.conditions?.find((c) => c.type === "ActivationFailed" && c.status === "True");
    const before = known.failure;
    const now = Date.now();
    if (!failed) {
      known.failure = undefined;
      if (before) this.tellModel(known, resource, { retryAt: now });
      return;
    }
    const parsed = status?.retryAt ? Date.parse(status.retryAt) : Number.NaN;
    const retryAt = Number.isNaN(parsed) ? undefined : parsed;
    const told = {
      since: failed.lastTransitionTime ?? "",
      message: failed.message ?? "the activation failed",
      retryAt,
    };
    known.failure = told;
    const same = before?.since === told.since && before.message === told.message;
    if (same && before.retryAt === retryAt) return;
    if (same && retryAt !== undefined && before.retryAt !== undefined && retryAt < before.retryAt)
      this.tellModel(known, resource, { retryAt });
    else
      this.tellModel(known, resource, {
        error: told.message,
        ...(retryAt !== undefined ? { retryAt } : {}),
      });
  }

  /**
   * While no pod of the Model is known, its tier as its status says it (`modelStatusTier`), told
   * when it changes: a start whose pod does not exist yet is `starting` for the activator's views
   * and its hold estimates, as for the status (before, `cold`: the tier came from pods alone). Once
   * a pod is known, its events say the tier.
   */
  private reportStatusTier(known: Known, resource: Model): void {
    const tier = modelStatusTier(resource.status);
    // Cold from the first: nothing to tell.
    if (tier === (known.statusTier ?? "cold")) return;
    if (this.podsReportedFor(known.model.key).length > 0) {
      known.statusTier = undefined;
      return;
    }
    this.tellModel(known, resource, {});
  }

  /**
   * Tells the activator news of the Model, not of a pod: a failure (or its end), or its tier while
   * no pod of it is known; with the tier its status says.
   */
  private tellModel(known: Known, resource: Model, news: { error?: string; retryAt?: number }): void {
    const tier = modelStatusTier(resource.status);
    if (this.podsReportedFor(known.model.key).length === 0) known.statusTier = tier;
    this.emit({
      model: known.model.config.id,
      replica: `${known.model.name}/activation`,
      tier,
      since: Date.now(),
      modelNews: true,
      ...news,
    });
  }

  private modelOfPod(pod: Pod): Known | undefined {
    for (const known of this.known.values())
      if (known.model.namespace === pod.metadata.namespace && known.matches(pod.metadata.labels))
        return known;
    return undefined;
  }

  private eventFor(known: Known, pod: Pod): ReplicaEvent {
    const event = replicaEventForPod(known.model.config.id, pod, known.model.spec.port);
    if (event.tier === "starting" || event.tier === "waking") {
      const status = this.models.get(known.model.key)?.status;
      const estimate = event.tier === "starting" ? status?.lastStartDuration : status?.lastWakeDuration;
      const ms = estimate ? parseDuration(String(estimate)) : undefined;
      if (ms !== undefined) event.estimateMs = ms;
    }
    return event;
  }

  private podChanged(pod: Pod): void {
    const podKey = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const known = this.modelOfPod(pod);
    const previous = this.podModel.get(podKey);
    if (previous && previous !== known?.model.key) {
      const before = this.known.get(previous);
      if (before)
        this.emit({
          model: before.model.config.id,
          replica: pod.metadata.name,
          tier: "cold",
          since: Date.now(),
        });
      this.podModel.delete(podKey);
    }
    if (!known) return;
    this.podModel.set(podKey, known.model.key);
    this.emit(this.eventFor(known, pod));
  }

  private podGone(pod: Pod): void {
    const podKey = `${pod.metadata.namespace}/${pod.metadata.name}`;
    const modelKey = this.podModel.get(podKey);
    this.podModel.delete(podKey);
    const known = modelKey ? this.known.get(modelKey) : undefined;
    if (known)
      this.emit({
        model: known.model.config.id,
        replica: pod.metadata.name,
        tier: "cold",
        since: Date.now(),
      });
  }
}
