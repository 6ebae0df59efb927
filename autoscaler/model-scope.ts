/**
 * The labels that tell apart the models of one id, beside `model`: on Kubernetes the Model's
 * `namespace` (two teams' Models of one id in two namespaces are two models, each with its own
 * activations, tiers and GPU time; added into one series, each team's rates were both teams'), as
 * Prometheus' own Kubernetes labels do; none locally, where ids are unique.
 */
export function modelScope(namespaced: boolean) {
  return {
    labelNames: namespaced ? ["namespace"] : [],
    of: (key: string | undefined): Record<string, string> =>
      namespaced && key !== undefined ? { namespace: key.slice(0, key.indexOf("/")) } : {},
  };
}
