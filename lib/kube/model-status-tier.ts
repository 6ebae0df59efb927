import { mostAwake, type Tier, tiers } from "../replica-event.ts";
import type { ModelStatusInput } from "./model-resource.ts";

const known = new Set<string>(tiers);

/**
 * The tier a Model's status says its model is in, as the autoscaler decided it: its pods' tiers,
 * and `starting` while its phase is Starting, which also counts the pods its workload asks for and
 * that do not exist yet (a quota, an admission webhook or a busy ReplicaSet controller keeps them
 * from being made). `replicaTiers` lists only pods, so an activator that read pods alone said
 * `cold` while the status, `kubectl get models` and `snooze_replica_tier` said `starting`.
 */
export function modelStatusTier(status: Pick<ModelStatusInput, "phase" | "replicaTiers"> | undefined): Tier {
  const said = (status?.replicaTiers ?? []).map((r) => r.tier).filter((t): t is Tier => known.has(t));
  if (status?.phase === "Starting") said.push("starting");
  return mostAwake(said);
}
