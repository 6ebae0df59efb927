import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, type KubeClient, paths } from "../../lib/kube/client.ts";
import type { SlotResource, SlotStatusInput } from "../../lib/kube/slot-resource.ts";
import type { Logger } from "../../lib/log.ts";
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

/** Writes a Slot's status when it changed; conditional, and left to the next change on conflict. */
export class SlotStatusWriter {
  private lastJson = "";
  private readonly client: KubeClient;
  private readonly log: Logger;

  constructor(client: KubeClient, log: Logger) {
    this.client = client;
    this.log = log;
  }

  write(
    namespace: string,
    resource: (SlotResource & { metadata: { resourceVersion?: string } }) | undefined,
    status: SlotStatus,
  ): void {
    if (!resource) return;
    const input = slotStatusInput(status, (resource.metadata as { generation?: number }).generation);
    const json = JSON.stringify(input);
    if (json === this.lastJson) return;
    this.lastJson = json;
    const path = `${paths.custom(group, version, "slots", namespace)}/${resource.metadata.name}/status`;
    void this.client
      .patch(path, { metadata: { resourceVersion: resource.metadata.resourceVersion }, status: input })
      .catch((error: unknown) => {
        // Written again on the next change, from the object the watch brings.
        this.lastJson = "";
        if (!isConflict(error)) this.log.warn("slot status write failed", { error });
      });
  }
}
