/** Snooze's Kubernetes API: one group, one version so far. */
export const group = "snooze.dev";
export const version = "v1alpha1";
export const apiVersion = `${group}/${version}`;
