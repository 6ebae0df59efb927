/**
 * Which of several Models that serve one model id gets its requests: the oldest
 * (`metadata.creationTimestamp`), then by namespace and name. A sortable key, so every activator
 * and every autoscaler replica picks the same one whatever order their watches saw the Models in
 * (before, the first one seen won: a restarted autoscaler woke one Model's pods while the
 * activators held the requests for the other's, and a Model deleted left its id served by nobody
 * until another Model changed).
 */
export function modelPrecedence(metadata: {
  name: string;
  namespace?: string;
  creationTimestamp?: unknown;
}): string {
  // RFC 3339 in UTC, as the API writes it, sorts as text; a space sorts before any name character.
  const created = typeof metadata.creationTimestamp === "string" ? metadata.creationTimestamp : "~";
  return `${created} ${metadata.namespace ?? "default"} ${metadata.name}`;
}

/** Labels Knative puts on a revision and its PodAutoscaler, copied onto the revision's Model. */
export const configurationLabel = "serving.knative.dev/configuration";
export const configurationGenerationLabel = "serving.knative.dev/configurationGeneration";
/**
 * The condition the autoscaler puts in a revision's Model status, True once its PodAutoscaler's
 * scale target is initialized, which is when Knative makes the Revision Ready; it stays, as
 * Knative's latest-ready revision only moves on to a newer one. In the status, which the
 * autoscaler writes anyway: the Model's metadata and spec are never updated (its RBAC has no
 * update or patch on Models).
 */
export const revisionReadyCondition = "RevisionReady";

/** Where a Knative revision's Model stands among the revisions of its Configuration. */
export interface RevisionOrder {
  /** `namespace/name` of the Configuration. */
  configuration: string;
  generation: number;
  ready: boolean;
}

/** The revision order of a Model made for a Knative revision; undefined for any other Model. */
export function revisionOrder(model: {
  metadata: { namespace?: string; labels?: Record<string, string> };
  status?: { conditions?: { type: string; status: string }[] };
}): RevisionOrder | undefined {
  const { metadata } = model;
  const configuration = metadata.labels?.[configurationLabel];
  const generation = Number(metadata.labels?.[configurationGenerationLabel]);
  if (!configuration || !Number.isSafeInteger(generation)) return undefined;
  return {
    configuration: `${metadata.namespace ?? "default"}/${configuration}`,
    generation,
    ready:
      model.status?.conditions?.some((c) => c.type === revisionReadyCondition && c.status === "True") ??
      false,
  };
}

/**
 * Of the revisions of one Configuration, the one whose Model has its aliases: the newest ready
 * revision, which Knative's Route sends the Configuration's latest traffic to (an alias on every
 * revision by the oldest-first rule sent requests to the revision a rollout had left); while none
 * is ready yet (a new Service), the newest. Order-free: ties go by key.
 */
export function leadingRevision<T extends { key: string; revision: RevisionOrder }>(
  revisions: readonly T[],
): T | undefined {
  const ahead = (a: T, b: T) =>
    a.revision.ready !== b.revision.ready
      ? a.revision.ready
      : a.revision.generation !== b.revision.generation
        ? a.revision.generation > b.revision.generation
        : a.key > b.key;
  let best: T | undefined;
  for (const r of revisions) if (!best || ahead(r, best)) best = r;
  return best;
}
