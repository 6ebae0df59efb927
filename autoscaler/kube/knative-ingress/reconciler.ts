import { type Clock, systemClock } from "../../../lib/clock.ts";
import {
  ingressVersion,
  isSnoozeIngress,
  type KIngress,
  knativeIngressPath,
} from "../../../lib/knative/ingress-class.ts";
import { compileHostTable } from "../../../lib/knative/ingress-routes.ts";
import { isConflict, isNotFound, type KubeClient } from "../../../lib/kube/client.ts";
import type { Informer } from "../../../lib/kube/informer.ts";
import { LeaseElector, type LeaseTiming, leaseName } from "../../../lib/kube/lease.ts";
import { kubeInformer } from "../../../lib/kube/list-watch.ts";
import type { Logger } from "../../../lib/log.ts";
import { type ProbeOutcome, probeActivators } from "./activator-prober.ts";
import { ingressStatus, statusSignature } from "./ingress-status.ts";
import { type SplitModel, splitModels } from "./split-models.ts";

export interface KnativeIngressReconcilerOptions {
  client: KubeClient;
  /** Only this namespace's KIngresses; all when absent. */
  namespace?: string;
  /** The Models (the autoscaler's informer), by `namespace/name`: a split's revision is routable when its Model exists. */
  models: {
    get(key: string): SplitModel | undefined;
    on(handler: { add?(): void; delete?(): void }): () => void;
  };
  /** Where the Lease that makes one autoscaler replica the writer lives. */
  leaseNamespace: string;
  identity: string;
  leaseTiming?: LeaseTiming;
  /** The activator Service's name in DNS, written as both load balancers' `domainInternal`. */
  domainInternal: string;
  /** Base URLs of every activator to probe. */
  activators(): Promise<string[]>;
  log: Logger;
  clock?: Clock;
  informer?: { resyncMs?: number; staleMs?: number };
}

/** While a KIngress waits for activators, it is probed again after this, doubling up to the max. */
const probeRetry = { initialMs: 100, maxMs: 5_000 };

/**
 * Snooze's Knative networking layer, control side: for each KIngress of Snooze's class, checks
 * that every split's revision has a Model (the activator routes through it) and that no older
 * KIngress has its hosts, probes every activator until all route its generation, and writes the
 * status that makes Knative's Route Ready. One autoscaler replica writes (a Lease); the activators
 * route from their own watch of the same objects, so nothing else needs carrying.
 */
export class KnativeIngressReconciler {
  readonly informer: Informer<KIngress>;
  private readonly options: KnativeIngressReconcilerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private elector?: LeaseElector;
  private pass?: Promise<void>;
  private again = false;
  private retry?: { cancel(): void };
  private retryMs = probeRetry.initialMs;
  private stopped = false;
  private unsubscribe?: () => void;
  /** KIngress versions every activator was seen to route, so a settled KIngress is not probed again. */
  private readonly served = new Set<string>();
  readonly counts = { passes: 0, writes: 0, conflicts: 0 };

  constructor(options: KnativeIngressReconcilerOptions) {
    this.options = options;
    this.clock = options.clock ?? systemClock;
    this.log = options.log;
    this.informer = kubeInformer<KIngress>(options.client, knativeIngressPath(options.namespace), {
      name: "ingresses.networking.internal.knative.dev",
      log: options.log,
      ...options.informer,
    });
  }

  async start(): Promise<void> {
    const changed = () => this.schedule();
    this.informer.on({ add: changed, update: changed, delete: changed });
    this.unsubscribe = this.options.models.on({ add: changed, delete: changed });
    await this.informer.start();
    this.elector = new LeaseElector({
      client: this.options.client,
      namespace: this.options.leaseNamespace,
      name: leaseName("snooze-knative-ingress", ...(this.options.namespace ? [this.options.namespace] : [])),
      identity: this.options.identity,
      timing: this.options.leaseTiming,
      log: this.log,
      onStartedLeading: () => this.schedule(),
    });
    this.elector.start();
  }

  get synced(): boolean {
    return this.informer.synced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.retry?.cancel();
    this.unsubscribe?.();
    await this.elector?.stop(true);
    await this.pass;
    await this.informer.stop();
  }

  /** Another pass over every KIngress, once the one under way (if any) ends; a change restarts the back-off. */
  schedule(retrying = false): void {
    if (this.stopped || !this.elector?.leading) return;
    this.retry?.cancel();
    this.retry = undefined;
    if (!retrying) this.retryMs = probeRetry.initialMs;
    if (this.pass) {
      this.again = true;
      return;
    }
    this.pass = (async () => {
      do {
        this.again = false;
        await this.reconcileAll().catch((error: unknown) =>
          this.log.warn("KIngress reconcile failed", { error }),
        );
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.pass = undefined;
    });
  }

  private async reconcileAll(): Promise<void> {
    this.counts.passes++;
    const ingresses = this.informer.list().filter(isSnoozeIngress);
    const table = compileHostTable(ingresses);
    let activators: string[] | undefined;
    let waiting = false;
    for (const ingress of ingresses) {
      if (ingress.metadata.deletionTimestamp || !this.elector?.leading || this.stopped) continue;
      const key = `${ingress.metadata.namespace}/${ingress.metadata.name}`;
      const version = ingressVersion(ingress);
      const { withoutModel } = splitModels(ingress, (revision) => this.options.models.get(revision));
      const configured = withoutModel.length === 0;
      const refusedHosts = table.conflicts.filter((c) => c.refused === key).map((c) => c.host);
      // One host is enough: an activator swaps a KIngress's hosts together (one table).
      const probeHost = [...table.hosts].find(([, route]) => route.ingress === key)?.[0];
      let probe: ProbeOutcome = this.served.has(version)
        ? { ready: true }
        : { ready: false, message: "Waiting for the network to be configured." };
      if (configured && refusedHosts.length === 0 && !probe.ready) {
        if (probeHost) {
          activators ??= await this.options.activators().catch((error: unknown) => {
            this.log.warn("could not list the activators to probe", { error });
            return [];
          });
          probe = await probeActivators(activators, probeHost, version);
        } else probe = { ready: true };
        if (probe.ready) this.served.add(version);
      }
      if (!configured || refusedHosts.length > 0 || !probe.ready) waiting = true;
      const status = ingressStatus(ingress, {
        withoutModel,
        refusedHosts,
        probe,
        domainInternal: this.options.domainInternal,
        now: this.clock.now(),
      });
      if (statusSignature(status) === statusSignature(ingress.status)) continue;
      await this.write(ingress, status);
    }
    // Versions no KIngress has any more are forgotten.
    const current = new Set(ingresses.map(ingressVersion));
    for (const version of [...this.served]) if (!current.has(version)) this.served.delete(version);
    // Activators may still be catching up (or a Model still coming): look again, backing off.
    if (waiting && !this.stopped && !this.again) {
      const delay = this.retryMs;
      this.retryMs = Math.min(probeRetry.maxMs, this.retryMs * 2);
      this.retry = this.clock.setTimeout(() => {
        this.retry = undefined;
        this.schedule(true);
      }, delay);
    }
  }

  private async write(ingress: KIngress, status: ReturnType<typeof ingressStatus>): Promise<void> {
    const object = `${knativeIngressPath(ingress.metadata.namespace)}/${ingress.metadata.name}`;
    try {
      await this.options.client.patch(`${object}/status`, {
        metadata: { resourceVersion: ingress.metadata.resourceVersion },
        // A merge patch keeps keys it does not name: the load balancers go explicitly.
        status: { publicLoadBalancer: null, privateLoadBalancer: null, ...status },
      });
      this.counts.writes++;
      const ready = status.conditions?.find((c) => c.type === "Ready");
      this.log.info("KIngress status", {
        ingress: `${ingress.metadata.namespace}/${ingress.metadata.name}`,
        generation: status.observedGeneration,
        ready: ready?.status,
        reason: ready?.reason,
      });
    } catch (error) {
      // A newer object is on its way through the watch, and brings another pass.
      if (isConflict(error)) this.counts.conflicts++;
      else if (!isNotFound(error)) throw error;
    }
  }
}
