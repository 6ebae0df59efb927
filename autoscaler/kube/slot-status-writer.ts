import type { Clock } from "../../lib/clock.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, type KubeClient, paths } from "../../lib/kube/client.ts";
import type { SlotResource, SlotStatusInput } from "../../lib/kube/slot-resource.ts";
import type { Logger } from "../../lib/log.ts";
import { RewriteBackoff } from "../../lib/rewrite-backoff.ts";
import { renameMembers, type SlotStatus } from "../../lib/slot-status.ts";

/** Members are keyed `namespace/name`; the Slot's status names them by name. */
const nameOf = (key: string) => key.slice(key.indexOf("/") + 1);

/** The Slot object's status from what the slot reports. */
export function slotStatusInput(reported: SlotStatus, generation?: number): SlotStatusInput {
  const status = renameMembers(reported, nameOf);
  const t = status.transition;
  return {
    observedGeneration: generation,
    members: [...status.members].sort(),
    ...(status.resident ? { resident: status.resident } : {}),
    ...(t
      ? {
          transition: {
            ...(t.from ? { from: t.from } : {}),
            to: t.to,
            step: t.step === "draining" ? ("draining" as const) : ("waking" as const),
            startedAt: t.since,
          },
        }
      : {}),
    swapCount: status.swaps,
    ...(status.lastSwap
      ? {
          lastSwap: {
            from: status.lastSwap.from,
            to: status.lastSwap.to,
            finishedAt: status.lastSwap.at,
            duration: `${Math.round(status.lastSwap.durationMs)}ms`,
          },
        }
      : {}),
  };
}

export interface SlotStatusWriterDeps {
  client: KubeClient;
  log: Logger;
  clock: Clock;
  namespace: string;
  /** The Slot object as last seen (none: nothing to write to). */
  resource(): (SlotResource & { metadata: { resourceVersion?: string } }) | undefined;
  status(): SlotStatus;
  /** Whether this process writes the slot now (it holds its Lease). */
  holding(): boolean;
}

/**
 * Writes a Slot's status when it changed; conditional. On 409 it is written again at the next
 * change, from the object the watch brings; a write the API server refused otherwise (429, 500,
 * away a moment) is made again with back-off (lib/rewrite-backoff.ts) while this process holds the
 * slot: before, it waited for the slot's next change, so a swap that ended the slot's activity
 * would not be said (`kubectl get slots` showing the swap under way) until something moved again.
 */
export class SlotStatusWriter {
  private lastJson = "";
  private readonly deps: SlotStatusWriterDeps;
  private readonly rewrites: RewriteBackoff;

  constructor(deps: SlotStatusWriterDeps) {
    this.deps = deps;
    this.rewrites = new RewriteBackoff(deps.clock);
  }

  write(): void {
    const resource = this.deps.resource();
    if (!resource || !this.deps.holding()) return;
    const input = slotStatusInput(
      this.deps.status(),
      (resource.metadata as { generation?: number }).generation,
    );
    const json = JSON.stringify(input);
    if (json === this.lastJson) return;
    this.lastJson = json;
    const path = `${paths.custom(group, version, "slots", this.deps.namespace)}/${resource.metadata.name}/status`;
    void this.deps.client
      .patch(path, { metadata: { resourceVersion: resource.metadata.resourceVersion }, status: input })
      .then(
        () => this.rewrites.succeeded(),
        (error: unknown) => {
          if (this.lastJson === json) this.lastJson = "";
          // Written again on the next change, from the object the watch brings.
          if (isConflict(error)) return;
          const delayMs = this.rewrites.failed(() => this.write());
          this.deps.log.warn("slot status write failed; writing it again", { error, delayMs });
        },
      );
  }
}
