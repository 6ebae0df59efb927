import { createHash } from "node:crypto";
import { type Clock, systemClock } from "../lib/clock.ts";
import { isConflict, isNotFound, type KubeClient, paths } from "../lib/kube/client.ts";
import { type Lease, microTime } from "../lib/kube/lease.ts";
import type { MemberRef } from "./messages.ts";
import type { ResidencyIntent } from "./slot-residency.ts";
import { forbid, type Verdict } from "./verdict.ts";

/**
 * Admission claims: what serializes two writes that would each make a member of the same slot
 * resident. The residency rule reads the cluster fresh, but the apiserver stores an allowed object
 * only after every webhook has answered, so two reviews running side by side (on one replica or
 * on two) each find the slot empty. Before allowing such a write the webhooks compare-and-swap a
 * claim on the slot, kept in the apiserver: a coordination.k8s.io Lease of their own per slot
 * (`snooze-claim-<namespace>.<slot>`, in a namespace that holds nothing else, snooze-slot-claims:
 * the webhooks may write Leases there, and only read the autoscaler's `snooze-slot-<slot>`), whose holderIdentity names the member admitted and whose renewTime says
 * when. Of two writers exactly one wins the compare-and-swap; the other reads the winner's claim
 * and is refused until the claim ends, a window after it was written (judged without comparing
 * clocks, see checkClaim), by which time the admitted object is stored and the fresh read sees it;
 * or until the member gives it back (releaseClaim).
 */

/** Long enough for the apiserver to store an allowed object after the webhooks answered. */
export const claimWindowMs = 15_000;
/** Reads and writes of a claim: on a conflict the claim is read again, at most this many times. */
export const claimAttempts = 3;

export interface Claim {
  member: MemberRef;
  /** When the write was admitted (ms since the epoch, on the clock of the replica that wrote it). */
  at: number;
  windowMs: number;
}

/** A claim as stored: its resourceVersion makes the next write conditional. */
export interface StoredClaim {
  resourceVersion: string;
  /** Undefined when the Lease does not hold a readable claim (it is then free). */
  claim?: Claim;
  /**
   * How long this replica has seen this very version of the claim (its resourceVersion), on its own
   * monotonic clock: 0 on the first read. No other clock enters it, so it is what a claim's end is
   * judged by when its writer did not end it (see checkClaim).
   */
  seenForMs: number;
}

export interface ClaimStore {
  /** The claim on a slot of `namespace`; undefined when none was ever written. */
  read(namespace: string, slot: string, signal?: AbortSignal): Promise<StoredClaim | undefined>;
  /**
   * Writes `claim` if the stored claim is still `previous` (same resourceVersion; created when
   * `previous` is undefined). False when another writer came first (409 Conflict or AlreadyExists).
   */
  write(
    namespace: string,
    slot: string,
    claim: Claim,
    previous: StoredClaim | undefined,
    signal?: AbortSignal,
  ): Promise<boolean>;
  /**
   * Deletes the claim if it is still `stored` (same resourceVersion). False when another writer
   * changed it meanwhile (it is then theirs and stays); true when it is gone.
   */
  release(namespace: string, slot: string, stored: StoredClaim, signal?: AbortSignal): Promise<boolean>;
}

export type ClaimCheck = { held: false } | { held: true; claim: Claim; ageMs: number; retryInMs: number };

const sameMember = (a: MemberRef, b: MemberRef) => a.kind === b.kind && a.name === b.name;

/**
 * Does a stored claim keep `self` (a member and its other names) out? A claim of another member
 * does until it is gone or this replica has seen it unchanged for its window. Clocks of different
 * replicas are never compared: the replica that wrote a claim deletes it when its window has passed
 * on its own clock (KubeClaimStore.write), and a claim still there (its writer died, or its delete
 * failed) ends a window after this replica first read it, on this replica's clock, as client-go's
 * leader election judges a Lease. That is never earlier than its window after it was written,
 * whatever the clocks say. `now` (the wall clock, which the claim's `renewTime` was written on)
 * only says how old the claim is and when to retry in a message.
 */
export function checkClaim(stored: StoredClaim | undefined, self: MemberRef[], now: number): ClaimCheck {
  const claim = stored?.claim;
  if (!claim || self.some((m) => sameMember(m, claim.member))) return { held: false };
  const seenMs = Math.max(0, stored.seenForMs);
  if (seenMs >= claim.windowMs) return { held: false };
  // Its writer ends it at `at + windowMs` on the writer's clock: the expected end when the clocks
  // agree; never later than a window after it was first seen here.
  const writerAgeMs = now - claim.at;
  const plausible = writerAgeMs >= seenMs && writerAgeMs < claim.windowMs;
  const ageMs = plausible ? writerAgeMs : seenMs;
  return { held: true, claim, ageMs, retryInMs: claim.windowMs - ageMs };
}

const seconds = (ms: number) => `${(Math.ceil(ms / 100) / 10).toFixed(1)}s`;
const ref = (member: MemberRef) => `${member.kind} "${member.name}"`;

export interface ClaimedSlot {
  slot: string;
  member: MemberRef;
  change: string;
  modelId: string;
  claimant: MemberRef;
  ageMs: number;
  retryInMs: number;
}

export function claimedSlotMessage(d: ClaimedSlot): string {
  return (
    `slot "${d.slot}" is claimed: ${ref(d.claimant)} was admitted as its resident ${seconds(d.ageMs)} ago ` +
    `and may not be stored yet; changing ${d.change} of ${ref(d.member)} would make a second member resident. ` +
    `Retry in ${seconds(d.retryInMs)}, when the slot's resident can be read; to switch, ask for a swap: ` +
    `send a request for model "${d.modelId}" through the activator, or ` +
    `POST /snooze/v1/models/${encodeURIComponent(d.modelId)}/wake on the activator.`
  );
}

export interface ClaimedAdmission {
  store: ClaimStore;
  /** The namespace of the slot (and of the member). */
  namespace: string;
  intent: ResidencyIntent;
  /** A dry run honours claims but writes none. */
  dryRun: boolean;
  /** The autoscaler's own writes (the Lease holder's): they take the claim whoever holds it. */
  override: boolean;
  /** The residency verdict without claims (reads the cluster); called after the claim is read. */
  decide: () => Promise<Verdict>;
  now: () => number;
  /** Aborted at the decision's deadline: no claim is written after it. */
  signal?: AbortSignal;
}

/**
 * The residency verdict with the slot's claim: read the claim, refuse if another member holds it,
 * else decide from the cluster (read after the claim, so after the claimed object was stored when
 * the claim has expired), and take the claim with a conditional write before allowing. A conflict
 * means another review took it meanwhile: read it again and decide again (bounded); a review that
 * cannot get its claim is refused, never allowed.
 */
export async function admitWithClaim(a: ClaimedAdmission): Promise<Verdict> {
  const { intent } = a;
  const self = [intent.member, ...(intent.sameAs ?? [])];
  for (let attempt = 1; attempt <= claimAttempts; attempt++) {
    const stored = await a.store.read(a.namespace, intent.slot, a.signal);
    const check = checkClaim(stored, self, a.now());
    if (check.held && !a.override) {
      return forbid(
        claimedSlotMessage({
          slot: intent.slot,
          member: intent.member,
          change: intent.change,
          modelId: intent.modelId,
          claimant: check.claim.member,
          ageMs: check.ageMs,
          retryInMs: check.retryInMs,
        }),
      );
    }
    const verdict = await a.decide();
    if (!verdict.allowed || a.dryRun) return verdict;
    a.signal?.throwIfAborted();
    const claim = { member: intent.member, at: a.now(), windowMs: claimWindowMs };
    if (await a.store.write(a.namespace, intent.slot, claim, stored, a.signal)) return verdict;
  }
  throw new Error(`the admission claim on slot "${intent.slot}" changed under ${claimAttempts} attempts`);
}

/**
 * A member that stops asking for its slot (scaled to 0, deleted, moved out; see `Leaving`) gives
 * its claim back, so that the next member is admitted at once rather than after the window. Only
 * the claim of that very member (not of its other name: a Model's workload may still run) and only
 * if nobody took it meanwhile (a conditional delete). Safe because the write that released it saw
 * the member asking in its stored object: the write that made it ask was stored, and the fresh read
 * of the next review sees the member for as long as it is resident. Best effort: a claim that
 * cannot be released ends with its window, and the write is not refused for it.
 */
export async function releaseClaim(
  store: ClaimStore,
  namespace: string,
  leaving: { slot: string; member: MemberRef },
  signal?: AbortSignal,
): Promise<boolean> {
  try {
    const stored = await store.read(namespace, leaving.slot, signal);
    if (!stored?.claim || !sameMember(stored.claim.member, leaving.member)) return false;
    return await store.release(namespace, leaving.slot, stored, signal);
  } catch {
    return false;
  }
}

/** Labels of every claim Lease; what the collection of ended claims lists. */
const claimLabels = { "app.kubernetes.io/component": "webhooks", "app.kubernetes.io/part-of": "snooze" };
const claimSelector = Object.entries(claimLabels)
  .map(([key, value]) => `${key}=${value}`)
  .join(",");

/** Annotations that say, on the Lease, whose claim it is. */
export const claimNamespaceAnnotation = "snooze.dev/claim-namespace";
export const claimSlotAnnotation = "snooze.dev/claim-slot";

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * The claim Lease's name: `snooze-claim-<namespace>.<slot>` when that is a valid name (a
 * namespace has no dot, so the first dot splits it unambiguously), else `snooze-claim-` and a
 * hash of both (no dot, so it never equals a readable one).
 */
export function claimLeaseName(namespace: string, slot: string): string {
  const readable = `snooze-claim-${namespace}.${slot}`;
  if (readable.length <= 253 && dnsSubdomain.test(readable)) return readable;
  const hash = createHash("sha256").update(`${namespace}/${slot}`).digest("hex").slice(0, 20);
  return `snooze-claim-${hash}`;
}

/** The claim a Lease holds: holderIdentity `<kind>/<name>`, renewTime, leaseDurationSeconds. */
export function claimOfLease(lease: Lease): Claim | undefined {
  const holder = lease.spec?.holderIdentity ?? "";
  const slash = holder.indexOf("/");
  const at = Date.parse(lease.spec?.renewTime ?? "");
  const seconds = lease.spec?.leaseDurationSeconds;
  if (slash <= 0 || slash === holder.length - 1 || Number.isNaN(at) || !seconds || seconds <= 0)
    return undefined;
  return {
    member: { kind: holder.slice(0, slash), name: holder.slice(slash + 1) },
    at,
    windowMs: seconds * 1000,
  };
}

export function leaseOfClaim(
  leaseNamespace: string,
  namespace: string,
  slot: string,
  claim: Claim,
  resourceVersion?: string,
): Lease {
  const time = microTime(claim.at);
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: claimLeaseName(namespace, slot),
      namespace: leaseNamespace,
      labels: { ...claimLabels },
      annotations: { [claimNamespaceAnnotation]: namespace, [claimSlotAnnotation]: slot },
      ...(resourceVersion ? { resourceVersion } : {}),
    },
    spec: {
      holderIdentity: `${claim.member.kind}/${claim.member.name}`,
      leaseDurationSeconds: Math.ceil(claim.windowMs / 1000),
      acquireTime: time,
      renewTime: time,
    },
  };
}

/** The API calls a claim store makes: KubeClient's, or a fake's. */
export type LeaseRequests = Pick<KubeClient, "request">;

/**
 * The clock claims are seen by: monotonic (performance.now), so no wall clock, this replica's or
 * another's, enters how long a claim has been seen; timers as the system's.
 */
const monotonicClock: Clock = { now: () => performance.now(), setTimeout: systemClock.setTimeout };

export interface ClaimStoreOptions {
  /** Each call gives up after this long (and at the decision's deadline). Default 3 s. */
  timeoutMs?: number;
  /**
   * How long a claim has been seen here, and when a claim this replica wrote is deleted (its
   * window after the write). Default: a monotonic clock; tests tick a manual one.
   */
  clock?: Clock;
}

/**
 * Claims as Leases in their own namespace (snooze-slot-claims). Each call gives up after `timeoutMs`
 * (and at the decision's deadline), so a claim never holds a review past it. A claim this store
 * wrote is deleted by it once its window has passed (conditionally: not if rewritten since); it
 * remembers since when it has seen each claim's current version (one entry per slot read).
 */
export class KubeClaimStore implements ClaimStore {
  readonly #client: LeaseRequests;
  readonly #namespace: string;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #sightings = new Map<string, { resourceVersion: string; since: number }>();
  readonly #timers = new Set<{ cancel(): void }>();

  constructor(client: LeaseRequests, leaseNamespace: string, options: ClaimStoreOptions = {}) {
    this.#client = client;
    this.#namespace = leaseNamespace;
    this.#timeoutMs = options.timeoutMs ?? 3_000;
    this.#clock = options.clock ?? monotonicClock;
  }

  /** How long this version of the Lease `name` has been seen here (0: just now, the first time). */
  #seen(name: string, resourceVersion: string): number {
    const now = this.#clock.now();
    const seen = this.#sightings.get(name);
    if (seen?.resourceVersion === resourceVersion) return now - seen.since;
    this.#sightings.set(name, { resourceVersion, since: now });
    return 0;
  }

  async read(namespace: string, slot: string, signal?: AbortSignal): Promise<StoredClaim | undefined> {
    const name = claimLeaseName(namespace, slot);
    try {
      const lease = await this.#client.request<Lease>("GET", paths.lease(this.#namespace, name), {
        timeoutMs: this.#timeoutMs,
        ...(signal ? { signal } : {}),
      });
      const claim = claimOfLease(lease);
      const resourceVersion = lease.metadata.resourceVersion ?? "";
      return { resourceVersion, ...(claim ? { claim } : {}), seenForMs: this.#seen(name, resourceVersion) };
    } catch (error) {
      if (isNotFound(error)) {
        this.#sightings.delete(name);
        return undefined;
      }
      throw error;
    }
  }

  async write(
    namespace: string,
    slot: string,
    claim: Claim,
    previous: StoredClaim | undefined,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const body = leaseOfClaim(this.#namespace, namespace, slot, claim, previous?.resourceVersion);
    const options = { body, timeoutMs: this.#timeoutMs, ...(signal ? { signal } : {}) };
    try {
      const written = previous
        ? await this.#client.request<Lease>("PUT", paths.lease(this.#namespace, body.metadata.name), options)
        : await this.#client.request<Lease>("POST", paths.leases(this.#namespace), options);
      const resourceVersion = written?.metadata?.resourceVersion ?? "";
      this.#seen(body.metadata.name, resourceVersion);
      this.#endAfterWindow(namespace, slot, claim.windowMs, resourceVersion);
      return true;
    } catch (error) {
      // 409: Conflict (a stale resourceVersion) or AlreadyExists; 404: deleted since it was read.
      if (isConflict(error) || (previous && isNotFound(error))) return false;
      throw error;
    }
  }

  release(namespace: string, slot: string, stored: StoredClaim, signal?: AbortSignal): Promise<boolean> {
    return this.#delete(claimLeaseName(namespace, slot), stored.resourceVersion, signal);
  }

  /** Deletes the Lease `name` if it is still at `resourceVersion`; true when it is gone. */
  async #delete(name: string, resourceVersion: string, signal?: AbortSignal): Promise<boolean> {
    const body = { apiVersion: "v1", kind: "DeleteOptions", preconditions: { resourceVersion } };
    try {
      await this.#client.request("DELETE", paths.lease(this.#namespace, name), {
        body,
        timeoutMs: this.#timeoutMs,
        ...(signal ? { signal } : {}),
      });
      this.#sightings.delete(name);
      return true;
    } catch (error) {
      // 409: rewritten since it was read (someone else's claim now); 404: gone already.
      if (isConflict(error)) return false;
      if (isNotFound(error)) {
        this.#sightings.delete(name);
        return true;
      }
      throw error;
    }
  }

  /**
   * Deletes the claims that have ended but are still stored: their writer was gone before their
   * window passed (or its delete failed), or their slot is never raced for again (a Slot deleted).
   * A claim ends here as checkClaim ends it: seen unchanged for its window on this replica's own
   * clock (so a claim first listed now is deleted at the next collection at the earliest), or
   * holding no readable claim. Conditional on the version listed; one list of the claims' namespace.
   * Resolves to how many were deleted.
   */
  async collect(signal?: AbortSignal): Promise<number> {
    const list = await this.#client.request<{ items?: Lease[] }>("GET", paths.leases(this.#namespace), {
      query: { labelSelector: claimSelector },
      timeoutMs: this.#timeoutMs,
      ...(signal ? { signal } : {}),
    });
    const listed = new Set<string>();
    let deleted = 0;
    for (const lease of list?.items ?? []) {
      const name = lease.metadata.name;
      const resourceVersion = lease.metadata.resourceVersion ?? "";
      listed.add(name);
      const seenMs = this.#seen(name, resourceVersion);
      const claim = claimOfLease(lease);
      if (claim && seenMs < claim.windowMs) continue;
      if (await this.#delete(name, resourceVersion, signal)) deleted++;
    }
    // What is no longer stored needs no memory here.
    for (const name of this.#sightings.keys()) if (!listed.has(name)) this.#sightings.delete(name);
    return deleted;
  }

  /**
   * The claim just written ends when its window has passed on this replica's own clock (the one
   * that wrote it): deleted unless rewritten since (a renewal, another member's claim). If this
   * fails or the process is gone first, readers end it a window after they first saw it.
   */
  #endAfterWindow(namespace: string, slot: string, windowMs: number, resourceVersion: string): void {
    if (!resourceVersion) return;
    const timer = this.#clock.setTimeout(() => {
      this.#timers.delete(timer);
      this.release(namespace, slot, { resourceVersion, seenForMs: windowMs }).catch(() => {});
    }, windowMs);
    this.#timers.add(timer);
  }

  /** Stops ending the claims this store wrote (they end a window after readers first saw them). */
  close(): void {
    for (const timer of this.#timers) timer.cancel();
    this.#timers.clear();
  }
}
