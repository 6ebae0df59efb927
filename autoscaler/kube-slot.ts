import { group, version } from "../lib/kube/api-group.ts";
import { isConflict, type KubeClient, paths } from "../lib/kube/client.ts";
import type { SlotResource, SlotStatusInput } from "../lib/kube/slot-resource.ts";
import type { Logger } from "../lib/log.ts";
import type { SlotConfig } from "../lib/settings/index.ts";
import type { KubeModelController } from "./kube-model-controller.ts";
import { decideSlot, isResident } from "./slot-arbiter.ts";

export interface KubeSlotDeps {
  client: KubeClient;
  log: Logger;
  /** Whether the slot's Lease is still ours right now. */
  holding(): boolean;
  /** The Slot object, when one exists (its settings; its status is written). */
  resource(): (SlotResource & { metadata: { resourceVersion?: string } }) | undefined;
}

/**
 * One slot (one accelerator shared by several Models of a namespace) on Kubernetes, driven by the
 * holder of its Lease. The arbiter (`decideSlot`, the same one local mode uses) says who may be
 * resident; each member's pass then runs with a cap on its awake replicas: 0 for everyone but the
 * resident, and 0 for the resident too while it yields in a swap. A target is granted the slot only
 * once the incumbent has no resident replica left, so two members are never awake at once.
 */
export class KubeSlot {
  readonly namespace: string;
  readonly name: string;
  config: SlotConfig;
  private readonly deps: KubeSlotDeps;
  private readonly log: Logger;
  readonly members = new Map<string, KubeModelController>();
  private yielding?: { from: string; to: string; startedAt: number };
  private residentSince = 0;
  private lastSwapAt = Number.NEGATIVE_INFINITY;
  private swapCount = 0;
  private lastSwap?: { from: string; to: string; finishedAt: string; durationMs: number };
  private pending = false;
  private timer?: NodeJS.Timeout;
  private leading = false;
  private lastStatusJson = "";
  /** The most residents ever seen at once: the invariant says 1. */
  maxResidents = 0;

  constructor(namespace: string, config: SlotConfig, deps: KubeSlotDeps) {
    this.namespace = namespace;
    this.name = config.name;
    this.config = config;
    this.deps = deps;
    this.log = deps.log.child({ slot: `${namespace}/${config.name}` });
  }

  lead(): void {
    this.leading = true;
    this.yielding = undefined;
    this.residentSince = Date.now();
    this.lastStatusJson = "";
    this.changed();
  }

  standDown(): void {
    this.leading = false;
    clearTimeout(this.timer);
  }

  /** A member changed: evaluate once, after the current turn. */
  changed(): void {
    if (!this.leading || this.pending) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      this.evaluate();
    });
  }

  private evaluate(): void {
    if (!this.leading || !this.deps.holding()) return;
    clearTimeout(this.timer);
    const members = [...this.members.values()].filter((m) => m.isLeading);
    const views = members.map((m) => m.slotView());
    const residents = views.filter((v) => isResident(v.tier));
    this.maxResidents = Math.max(this.maxResidents, residents.length);
    if (residents.length > 1)
      this.log.error("invariant broken: more than one resident", {
        residents: residents.map((r) => r.model),
      });
    const now = Date.now();
    const caps = new Map<string, number | undefined>(views.map((v) => [v.model, 0]));

    if (this.yielding) {
      const { from, to } = this.yielding;
      if (residents.some((r) => r.model === from)) {
        // Still leaving: nobody else may come up yet.
      } else {
        this.log.info("the incumbent left; granting the slot", { from, to });
        this.finishSwap(from, to, now);
        if (views.find((v) => v.model === to && v.held > 0) && residents.length === 0)
          caps.set(to, undefined);
      }
    } else if (residents.length > 0) {
      const resident = residents[0]!;
      caps.set(resident.model, undefined);
      const decision = decideSlot({
        ...this.config,
        members: views,
        residentSince: this.residentSince,
        lastSwapAt: this.lastSwapAt,
        now,
      });
      if (decision.kind === "swap") {
        this.log.info("swapping", { from: resident.model, to: decision.to, reason: decision.reason });
        this.yielding = { from: resident.model, to: decision.to, startedAt: now };
        caps.set(resident.model, 0);
      } else if (decision.kind === "wait" && Number.isFinite(decision.at)) this.arm(decision.at - now);
    } else {
      const decision = decideSlot({
        ...this.config,
        members: views,
        residentSince: this.residentSince,
        lastSwapAt: this.lastSwapAt,
        now,
      });
      if (decision.kind === "grant" || decision.kind === "swap") {
        this.log.info("granting", { to: decision.to, reason: decision.reason });
        caps.set(decision.to, undefined);
        this.residentSince = now;
      } else if (Number.isFinite(decision.at)) this.arm(decision.at - now);
    }
    for (const member of members) {
      member.cap = caps.get(member.model.key);
      member.pass();
    }
    this.writeStatus(
      views.map((v) => v.model),
      residents[0]?.model,
    );
  }

  private finishSwap(from: string, to: string, now: number): void {
    const started = this.yielding?.startedAt ?? now;
    this.yielding = undefined;
    this.lastSwapAt = now;
    this.residentSince = now;
    this.swapCount++;
    this.lastSwap = { from, to, finishedAt: new Date(now).toISOString(), durationMs: now - started };
  }

  private arm(ms: number): void {
    this.timer = setTimeout(() => this.changed(), Math.max(10, ms));
    this.timer.unref();
  }

  /** The Slot's status, when a Slot object exists; conditional, and left to the next pass on conflict. */
  private writeStatus(memberKeys: string[], residentKey: string | undefined): void {
    const resource = this.deps.resource();
    if (!resource) return;
    const nameOf = (key: string | undefined) => key?.split("/")[1];
    const status: SlotStatusInput = {
      observedGeneration: (resource.metadata as { generation?: number }).generation,
      members: memberKeys.map((k) => nameOf(k)!).sort(),
      ...(residentKey ? { resident: nameOf(residentKey) } : {}),
      ...(this.yielding
        ? {
            transition: {
              from: nameOf(this.yielding.from),
              to: nameOf(this.yielding.to)!,
              step: "draining" as const,
              startedAt: new Date(this.yielding.startedAt).toISOString(),
            },
          }
        : {}),
      swapCount: this.swapCount,
      ...(this.lastSwap
        ? {
            lastSwap: {
              from: nameOf(this.lastSwap.from),
              to: nameOf(this.lastSwap.to)!,
              finishedAt: this.lastSwap.finishedAt,
              duration: `${Math.round(this.lastSwap.durationMs)}ms`,
            },
          }
        : {}),
    };
    const json = JSON.stringify(status);
    if (json === this.lastStatusJson) return;
    this.lastStatusJson = json;
    const path = `${paths.custom(group, version, "slots", this.namespace)}/${this.name}/status`;
    void this.deps.client
      .patch(path, { metadata: { resourceVersion: resource.metadata.resourceVersion }, status })
      .catch((error: unknown) => {
        // Written again on the next pass, from the object the watch brings.
        this.lastStatusJson = "";
        if (!isConflict(error)) this.log.warn("slot status write failed", { error });
      });
  }

  state() {
    return {
      slot: `${this.namespace}/${this.name}`,
      leading: this.leading,
      members: [...this.members.keys()],
      yielding: this.yielding,
      swapCount: this.swapCount,
      maxResidents: this.maxResidents,
    };
  }
}
