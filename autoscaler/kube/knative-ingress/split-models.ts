import type { KIngress } from "../../../lib/knative/ingress-class.ts";

/** A Model as the splits need it: that it exists. */
export interface SplitModel {
  metadata: { name: string };
}

/**
 * **Pure**: the revisions of a KIngress's splits that have no Model. A split names a revision; the
 * activator routes it through the Model of the same name (its Kubernetes identity, whatever name
 * the engine serves), so a split without a Model cannot be routed.
 */
export function splitModels(
  ingress: KIngress,
  modelOf: (key: string) => SplitModel | undefined,
): { withoutModel: string[] } {
  const withoutModel = new Set<string>();
  for (const rule of ingress.spec?.rules ?? [])
    for (const path of rule.http?.paths ?? [])
      for (const split of path.splits ?? []) {
        const revision = `${split.serviceNamespace}/${split.serviceName}`;
        if (!modelOf(revision)) withoutModel.add(revision);
      }
  return { withoutModel: [...withoutModel].sort() };
}
