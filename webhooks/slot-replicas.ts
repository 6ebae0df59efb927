import { slotModelReplicasMessage } from "./messages.ts";
import { integerAt, stringAt } from "./object-path.ts";
import { modelSlot } from "./slot-members.ts";
import { allow, forbid, type Verdict } from "./verdict.ts";

/** A Model in a slot may not ask for more than one replica (replicas, minReplicas, minPods, maxReplicas). */
export function validateSlotModelReplicas(model: unknown): Verdict {
  const slot = modelSlot(model);
  if (!slot) return allow();
  const asked: [string, number][] = [];
  for (const field of ["replicas", "minReplicas", "minPods", "maxReplicas"]) {
    const value = integerAt(model, "spec", field);
    if (value !== undefined && value > 1) asked.push([`spec.${field}`, value]);
  }
  if (asked.length === 0) return allow();
  return forbid(slotModelReplicasMessage(stringAt(model, "metadata", "name") ?? "", slot, asked));
}
