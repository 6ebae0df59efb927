/**
 * A Knative revision's progress deadline in ms, as its Deployment carries it, or undefined when
 * the Deployment says none. Knative's revision reconciler writes `spec.progressDeadlineSeconds`
 * from the revision's `serving.knative.dev/progress-deadline` annotation, else from the
 * `progress-deadline` of the `config-deployment` ConfigMap (10 minutes by default); the Deployment
 * controller counts it, and its verdict (`Progressing` False `ProgressDeadlineExceeded`) is what
 * makes Knative fail the revision with the pod's reason. Read there, it needs no watch of Revisions
 * or of another ConfigMap, and it is the effective value, whichever of the two set it.
 */
export function progressDeadlineOf(deployment: {
  spec?: { progressDeadlineSeconds?: unknown };
}): number | undefined {
  const seconds = deployment.spec?.progressDeadlineSeconds;
  return typeof seconds === "number" && Number.isSafeInteger(seconds) && seconds > 0
    ? seconds * 1_000
    : undefined;
}
