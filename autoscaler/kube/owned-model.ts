import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject, paths } from "../../lib/kube/client.ts";
import { ownedBy, sameSpec } from "./workload-models.ts";

/** What ensureOwnedModel did. */
export type OwnedModelResult =
  /** A Model of that name exists and is not the autoscaler's for this owner: left alone. */
  | "foreign"
  /** It exists and says what is wanted. */
  | "unchanged"
  | "created"
  /** It said something else: deleted, then created anew. */
  | "replaced"
  /** The create met one that appeared meanwhile (409): the next sync compares again. */
  | "raced";

/**
 * Makes the Model the autoscaler derives for `owner` (an annotated Deployment, a Snooze-class
 * PodAutoscaler) exist as `desired`. The autoscaler creates and deletes Models, never edits one: a
 * changed Model is deleted (preconditioned on the version compared) and created again.
 */
export async function ensureOwnedModel(
  client: KubeClient,
  existing: (KubeObject & { spec?: unknown }) | undefined,
  desired: KubeObject & { spec?: unknown },
  owner: { kind: string; name: string },
): Promise<OwnedModelResult> {
  if (existing && !ownedBy(existing, owner)) return "foreign";
  if (existing && sameSpec(existing.spec as Record<string, unknown>, desired.spec as Record<string, unknown>))
    return "unchanged";
  const collection = paths.custom(group, version, "models", desired.metadata.namespace);
  if (existing) {
    await client
      .delete(`${collection}/${existing.metadata.name}`, {
        preconditions: { uid: existing.metadata.uid, resourceVersion: existing.metadata.resourceVersion },
      })
      .catch((error: unknown) => {
        if (!isNotFound(error) && !isConflict(error)) throw error;
      });
  }
  return client.create(collection, desired).then(
    () => (existing ? "replaced" : "created"),
    (error: unknown) => {
      if (!isConflict(error)) throw error;
      return "raced";
    },
  );
}
