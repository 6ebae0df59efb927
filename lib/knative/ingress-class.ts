import type { KubeObject } from "../kube/client.ts";
import type { Condition } from "../kube/condition.ts";

/**
 * Knative's KIngress (`ingresses.networking.internal.knative.dev/v1alpha1`), the fields Snooze's
 * networking layer reads and writes. Knative's Route reconciler writes the spec (one rule per host
 * set and visibility, splits naming revisions); the ingress class's owner routes it and writes the
 * status that makes the Route Ready. See knative.dev/networking pkg/apis/networking/v1alpha1.
 */
export const knativeIngressGroup = "networking.internal.knative.dev";
export const knativeIngressVersion = "v1alpha1";
export const knativeIngressPlural = "ingresses";

/**
 * Snooze's ingress class. Knative reads the class from this annotation on a Service or Route (or
 * the `ingress-class` key of the `config-network` ConfigMap) and copies it onto the KIngress; it
 * does not validate the value. The name stays out of `knative.dev`, as Knative asks of
 * third-party autoscaler classes, so it can never be mistaken for one of Knative's own layers.
 */
export const snoozeIngressClass = "ingress.snooze.dev";
export const ingressClassAnnotation = "networking.knative.dev/ingress.class";
/** The alternative spelling Knative also accepts. */
export const ingressClassAltAnnotation = "networking.knative.dev/ingress-class";

/**
 * Knative's readiness probe of a data plane (knative.dev/networking pkg/http/header): a request
 * with `K-Network-Probe: probe` asks the proxy which version of a host's configuration it serves;
 * it answers in `K-Network-Hash`. Here the version is `<uid>/<generation>` of the KIngress.
 */
export const probeHeader = "k-network-probe";
export const probeValue = "probe";
export const probeHashHeader = "k-network-hash";

export type IngressVisibility = "ExternalIP" | "ClusterLocal";

export interface IngressBackendSplit {
  serviceNamespace: string;
  serviceName: string;
  servicePort?: number | string;
  /** Optional when a path has a single split (then it takes 100). */
  percent?: number;
  appendHeaders?: Record<string, string>;
}

export interface HTTPIngressPath {
  /** A literal prefix; absent: every path. */
  path?: string;
  rewriteHost?: string;
  headers?: Record<string, { exact: string }>;
  splits: IngressBackendSplit[];
  appendHeaders?: Record<string, string>;
}

export interface IngressRule {
  hosts?: string[];
  visibility?: IngressVisibility;
  http?: { paths: HTTPIngressPath[] };
}

export interface LoadBalancerIngressStatus {
  ip?: string;
  domain?: string;
  domainInternal?: string;
  meshOnly?: boolean;
}

export interface KIngressStatus {
  observedGeneration?: number;
  conditions?: Condition[];
  publicLoadBalancer?: { ingress?: LoadBalancerIngressStatus[] };
  privateLoadBalancer?: { ingress?: LoadBalancerIngressStatus[] };
}

export interface KIngress extends KubeObject {
  spec?: { rules?: IngressRule[]; tls?: unknown[]; httpOption?: string };
  status?: KIngressStatus;
}

/** Whether Snooze owns this KIngress (its class annotation names Snooze's class). */
export function isSnoozeIngress(ingress: KubeObject): boolean {
  const annotations = ingress.metadata.annotations ?? {};
  return (
    (annotations[ingressClassAnnotation] ?? annotations[ingressClassAltAnnotation])?.trim() ===
    snoozeIngressClass
  );
}

/** The version of a KIngress's configuration a data plane reports in `K-Network-Hash`. */
export function ingressVersion(ingress: KubeObject): string {
  return `${ingress.metadata.uid ?? ""}/${ingress.metadata.generation ?? 0}`;
}

export const knativeIngressPath = (namespace?: string) =>
  namespace
    ? `/apis/${knativeIngressGroup}/${knativeIngressVersion}/namespaces/${namespace}/${knativeIngressPlural}`
    : `/apis/${knativeIngressGroup}/${knativeIngressVersion}/${knativeIngressPlural}`;
