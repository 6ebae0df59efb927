import { type Logger, silentLogger } from "../log.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject, paths } from "./client.ts";
import { fitName, maxObjectName } from "./object-name.ts";

/** A coordination.k8s.io/v1 Lease as the API serves it. */
export interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** Where a holder can be reached: activators' demand and followers' forwards go there. */
export const leaderAddressAnnotation = "snooze.dev/leader-address";

export interface LeaseTiming {
  /** How long a lease is valid after its last renewal; a dead holder's lease is taken after this. */
  durationMs: number;
  /** A holder that could not renew for this long stops acting (before anyone else may take it). */
  renewDeadlineMs: number;
  /** How often holders renew and others try to acquire. */
  retryMs: number;
}

export const defaultLeaseTiming: LeaseTiming = { durationMs: 8_000, renewDeadlineMs: 5_000, retryMs: 1_000 };

export interface LeaseElectorOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  /** Who we are: the pod name (the webhooks compare it with a pod-bound token's pod). */
  identity: string;
  /** Our address for forwarded requests, published in the Lease's annotation. */
  address?: string;
  timing?: LeaseTiming;
  log?: Logger;
  onStartedLeading?(): void;
  onStoppedLeading?(): void;
  /** The holder changed (anyone), for forwarding. */
  onHolderChanged?(holder: LeaseHolder | undefined): void;
  /**
   * The clock the lease's durations are measured on (ms); default `performance.now()`. Monotonic:
   * a system clock set back or forward (NTP stepping it, a VM resumed) changes no duration, as
   * client-go's monotonic readings ensure. The times written in the Lease stay wall time.
   */
  monotonicNow?: () => number;
}

export interface LeaseHolder {
  identity: string;
  address?: string;
}

/** RFC 3339 with microseconds, as the API's MicroTime wants it. */
export const microTime = (ms: number) => new Date(ms).toISOString().replace(/Z$/, "000Z");

/**
 * Leader election on one Lease, the way client-go's leaderelection does it: a candidate takes a
 * Lease whose holder has not renewed for `durationMs` (judged by when this process last saw the
 * record change, so clocks need not agree; measured on the monotonic clock, so a system clock that
 * jumps moves no deadline), holders renew every `retryMs`, and every write is a
 * conditional replace on the resourceVersion read just before, so of two candidates exactly one
 * wins (the other gets 409 and re-reads). A holder that cannot renew within `renewDeadlineMs`
 * stops acting before its lease can expire for the others; a holder that stops gracefully
 * releases the Lease so a successor takes it at its next try.
 */
export class LeaseElector {
  readonly name: string;
  private readonly options: LeaseElectorOptions;
  private readonly timing: LeaseTiming;
  private readonly log: Logger;
  private readonly monotonicNow: () => number;
  private isLeading = false;
  /** When the last successful write was sent, on the monotonic clock. */
  private lastRenewed = 0;
  /** The record last seen and when it was first seen, on the monotonic clock. */
  private observed?: { key: string; at: number };
  private currentHolder?: LeaseHolder;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private inFlight?: Promise<void>;
  /** The resourceVersion of the Lease as this elector last wrote it. */
  private lastWritten?: string;

  constructor(options: LeaseElectorOptions) {
    this.options = options;
    this.name = options.name;
    this.timing = options.timing ?? defaultLeaseTiming;
    this.log = (options.log ?? silentLogger).child({ lease: options.name });
    this.monotonicNow = options.monotonicNow ?? (() => performance.now());
  }

  get leading(): boolean {
    return this.isLeading && this.monotonicNow() - this.lastRenewed < this.timing.renewDeadlineMs;
  }

  get holder(): LeaseHolder | undefined {
    return this.currentHolder;
  }

  start(): void {
    this.stopped = false;
    this.tick();
  }

  /** Tries once now (after a running try); resolves when it is done. */
  async tryNow(): Promise<void> {
    await this.inFlight;
    this.inFlight = this.tryAcquireOrRenew();
    await this.inFlight;
  }

  /** Stops trying; when leading and `release`, hands the Lease back so another takes it at once. */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inFlight;
    if (this.isLeading) {
      this.setLeading(false);
      if (release) await this.release().catch((error) => this.log.warn("release failed", { error }));
    }
  }

  /**
   * Stops trying and, when leading, deletes the Lease, only as this holder's record (a delete
   * conditional on the resourceVersion it last wrote): for a Lease whose subject is gone for good
   * (a deleted Model's), which nobody campaigns for again. Released instead, it would stay in the
   * namespace forever, one for every Model ever made: a Knative revision makes one each. A
   * replica that still campaigns (it has not seen the Model go yet) creates it anew and, leading,
   * deletes it in turn once it sees the Model go.
   */
  async retire(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inFlight;
    if (!this.isLeading) return;
    this.setLeading(false);
    const limits = { timeoutMs: this.timing.renewDeadlineMs };
    try {
      const lease = await this.options.client.get<Lease>(this.path(), limits);
      // Only this elector's own last record: another elector of this process (the Model made again
      // at once, under the same identity) may have renewed it since, and leads by it now.
      if (lease.spec?.holderIdentity !== this.options.identity) return;
      if (lease.metadata.resourceVersion !== this.lastWritten) return;
      await this.options.client.delete(
        this.path(),
        { preconditions: { uid: lease.metadata.uid, resourceVersion: lease.metadata.resourceVersion } },
        limits,
      );
      this.log.info("deleted the lease: its subject is gone");
    } catch (error) {
      // Taken meanwhile (409), or gone already: its new holder or nobody needs it deleted by us.
      if (!isNotFound(error) && !isConflict(error)) this.log.warn("deleting the lease failed", { error });
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.inFlight = this.tryAcquireOrRenew().finally(() => {
      if (this.stopped) return;
      this.timer = setTimeout(
        () => this.tick(),
        this.timing.retryMs * (this.isLeading ? 1 : 1 + Math.random() * 0.2),
      );
      this.timer.unref();
    });
  }

  private path(): string {
    return paths.lease(this.options.namespace, this.name);
  }

  /**
   * The time one try (or a release) may take: a holder's ends at its renew deadline, as client-go
   * bounds a renew by RenewDeadline. With the client's own 30 s, a hung API server kept a holder
   * leading (its controllers not told to stand down) for up to 30 s, long after its Lease had
   * expired for the others (8 s) and another replica had taken it over: two leaders at once.
   */
  private tryTimeoutMs(): number {
    const left = this.isLeading
      ? this.timing.renewDeadlineMs - (this.monotonicNow() - this.lastRenewed)
      : this.timing.renewDeadlineMs;
    return Math.max(1, Math.ceil(left));
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { identity } = this.options;
    const limits = { signal: AbortSignal.timeout(this.tryTimeoutMs()) };
    const client = {
      get: <T>(path: string) => this.options.client.get<T>(path, limits),
      create: <T>(path: string, body: unknown) => this.options.client.create<T>(path, body, limits),
      replace: <T>(path: string, body: unknown) => this.options.client.replace<T>(path, body, limits),
    };
    // Written into the Lease for others to read: wall time. Every duration: `at`, monotonic.
    const now = Date.now();
    const at = this.monotonicNow();
    try {
      let lease: Lease;
      try {
        lease = await client.get<Lease>(this.path());
      } catch (error) {
        if (!isNotFound(error)) throw error;
        const created = await client.create<Lease>(paths.leases(this.options.namespace), {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: {
            name: this.name,
            namespace: this.options.namespace,
            annotations: this.annotations(),
          },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: Math.ceil(this.timing.durationMs / 1000),
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        });
        this.observe(created, at);
        this.lastWritten = created.metadata.resourceVersion;
        this.renewed(at);
        return;
      }
      this.observe(lease, at);
      const spec = lease.spec ?? {};
      const heldByOther = !!spec.holderIdentity && spec.holderIdentity !== identity;
      const validUntil = this.observed!.at + (spec.leaseDurationSeconds ?? 0) * 1000;
      if (heldByOther && validUntil > at) {
        if (this.isLeading) this.setLeading(false);
        return;
      }
      const takingOver = spec.holderIdentity !== identity;
      const updated = await client.replace<Lease>(this.path(), {
        ...lease,
        metadata: {
          ...lease.metadata,
          annotations: { ...lease.metadata.annotations, ...this.annotations() },
        },
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: Math.ceil(this.timing.durationMs / 1000),
          acquireTime: takingOver ? microTime(now) : spec.acquireTime,
          renewTime: microTime(now),
          leaseTransitions: (spec.leaseTransitions ?? 0) + (takingOver && spec.holderIdentity ? 1 : 0),
        },
      });
      this.observe(updated, at);
      this.lastWritten = updated.metadata.resourceVersion;
      this.renewed(at);
    } catch (error) {
      if (isConflict(error)) {
        this.log.debug("lost a race for the lease; reading it again next time");
      } else {
        this.log.warn("lease try failed", { error });
      }
      // Given up at the deadline (the signal): past it, whatever the monotonic reading rounds to.
      const pastDeadline =
        limits.signal.aborted || this.monotonicNow() - this.lastRenewed >= this.timing.renewDeadlineMs;
      if (this.isLeading && pastDeadline) {
        this.log.warn("could not renew the lease in time; stepping down");
        this.setLeading(false);
      }
    }
  }

  private annotations(): Record<string, string> {
    return this.options.address ? { [leaderAddressAnnotation]: this.options.address } : {};
  }

  private renewed(at: number): void {
    this.lastRenewed = at;
    if (!this.isLeading) this.setLeading(true);
  }

  /** Remembers when this process first saw the current record: expiry is judged by local time. */
  private observe(lease: Lease, at: number): void {
    const spec = lease.spec ?? {};
    const key = `${spec.holderIdentity}|${spec.renewTime}|${spec.leaseDurationSeconds}`;
    if (this.observed?.key !== key) this.observed = { key, at };
    const holder = spec.holderIdentity
      ? { identity: spec.holderIdentity, address: lease.metadata.annotations?.[leaderAddressAnnotation] }
      : undefined;
    if (
      holder?.identity !== this.currentHolder?.identity ||
      holder?.address !== this.currentHolder?.address
    ) {
      this.currentHolder = holder;
      this.options.onHolderChanged?.(holder);
    }
  }

  private setLeading(leading: boolean): void {
    this.isLeading = leading;
    this.log.info(leading ? "leading" : "not leading", { identity: this.options.identity });
    if (leading) this.options.onStartedLeading?.();
    else this.options.onStoppedLeading?.();
  }

  private async release(): Promise<void> {
    // A stopping process waits no longer than a renew for an API server that does not answer.
    const limits = { timeoutMs: this.timing.renewDeadlineMs };
    const lease = await this.options.client.get<Lease>(this.path(), limits);
    if (lease.spec?.holderIdentity !== this.options.identity) return;
    const now = Date.now();
    await this.options.client.replace<Lease>(
      this.path(),
      {
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: "",
          leaseDurationSeconds: 1,
          renewTime: microTime(now),
        },
      },
      limits,
    );
    this.log.info("released the lease");
  }
}

/**
 * A name usable as a Lease name (a DNS subdomain): lower case, [a-z0-9.-], at most 253. One that
 * would be longer keeps its first part and ends in a hash of the whole, so it stays valid and two
 * long names never share a Lease. Found by an outside tester: cut at 253, a Model whose name (with
 * its namespace) filled that length got a Lease name ending in `-` or `.`, which the API server
 * refuses, so the Model never had a leader and was never served; two long names alike in their
 * first 232 characters shared one Lease.
 */
export function leaseName(...parts: string[]): string {
  const name = parts
    .join("-")
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "");
  return fitName(name, maxObjectName, parts.join("/"));
}

/**
 * The Lease that makes one autoscaler replica the single writer of a slot, in the autoscaler's
 * namespace; its holder is the autoscaler pod. The webhooks read it to tell the holder's writes.
 */
export const slotLeaseName = (slot: string) => leaseName("snooze-slot", slot);
