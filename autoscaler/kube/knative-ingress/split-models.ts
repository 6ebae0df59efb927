import type { KIngress } from "../../../lib/knative/ingress-class.ts";

/** A Model as the splits need it: its name and the model id it serves (default: its name). */
export interface SplitModel {
  metadata: { name: string };
  spec?: { model?: string };
}

/**
 * **Pure**: what the Models of a KIngress's splits allow. A split names a revision; the activator
 * routes it through the Model of the same name, and it routes one Model per model id (two Models
 * with one id: the first wins). So a split without a Model cannot be routed, and neither can one of
 * two revisions whose Models share an id (`snooze.dev/model` on the revision template does that).
 */
export function splitModels(
  ingress: KIngress,
  modelOf: (key: string) => SplitModel | undefined,
): { withoutModel: string[]; sharedIds: { id: string; revisions: string[] }[] } {
  const withoutModel = new Set<string>();
  const byId = new Map<string, Set<string>>();
  for (const rule of ingress.spec?.rules ?? [])
    for (const path of rule.http?.paths ?? [])
      for (const split of path.splits ?? []) {
        const revision = `${split.serviceNamespace}/${split.serviceName}`;
        const model = modelOf(revision);
        if (!model) {
          withoutModel.add(revision);
          continue;
        }
        const id = model.spec?.model ?? model.metadata.name;
        byId.set(id, (byId.get(id) ?? new Set()).add(revision));
      }
  return {
    withoutModel: [...withoutModel].sort(),
    sharedIds: [...byId]
      .filter(([, revisions]) => revisions.size > 1)
      .map(([id, revisions]) => ({ id, revisions: [...revisions].sort() }))
      .sort((a, b) => (a.id < b.id ? -1 : 1)),
  };
}
