import type { KIngress, KIngressStatus } from "../../../lib/knative/ingress-class.ts";
import type { Condition } from "../../../lib/kube/condition.ts";

/** What the reconciler found out about one KIngress. */
export interface IngressFacts {
  /** Splits (`namespace/name`) whose revision has no Model: the activator cannot route them. */
  withoutModel: string[];
  /** Hosts this KIngress names that an older KIngress already has. */
  refusedHosts: string[];
  /**
   * Whether every activator routes this generation: `ready`, or still waiting (with why). Not
   * asked while the network is not configured.
   */
  probe: { ready: true } | { ready: false; message: string };
  /** The activator's Service (`snooze-activator.snooze-system.svc.cluster.local`). */
  domainInternal: string;
  now: number;
}

type Status = Condition["status"];

/**
 * **Pure**: the status that tells Knative's Route whether this KIngress is served, in the shape
 * Knative's networking layers write (knative.dev/networking ingress_lifecycle.go): the living
 * condition set NetworkConfigured + LoadBalancerReady → Ready, the load balancers both pointing at
 * the activator's Service (the Route's placeholder Services become ExternalName Services to it),
 * and observedGeneration, without which the Route treats the status as stale. A condition keeps
 * its lastTransitionTime while its status stays.
 */
export function ingressStatus(ingress: KIngress, facts: IngressFacts): KIngressStatus {
  const previous = ingress.status?.conditions ?? [];
  const at = new Date(facts.now).toISOString().replace(/\.\d{3}Z$/, "Z");
  const make = (type: string, status: Status, reason?: string, message?: string): Condition => {
    const before = previous.find((c) => c.type === type);
    return {
      type,
      status,
      ...(reason ? { reason } : {}),
      ...(message ? { message } : {}),
      lastTransitionTime:
        before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : at,
    };
  };

  let network: Condition;
  if (facts.withoutModel.length > 0)
    network = make(
      "NetworkConfigured",
      "False",
      "RevisionWithoutModel",
      `No Snooze Model for ${facts.withoutModel.join(", ")}: Snooze's ingress routes only revisions of Snooze's autoscaler class (each through the Model of its name). Give the revision template Snooze's autoscaler class, or choose another ingress class for this Service.`,
    );
  else if (facts.refusedHosts.length > 0)
    network = make(
      "NetworkConfigured",
      "False",
      "HostConflict",
      `Another, older KIngress already routes ${facts.refusedHosts.join(", ")}.`,
    );
  else network = make("NetworkConfigured", "True");

  let balancer: Condition;
  if (network.status !== "True")
    balancer = make(
      "LoadBalancerReady",
      "Unknown",
      "Uninitialized",
      "Waiting for the network to be configured.",
    );
  else if (facts.probe.ready) balancer = make("LoadBalancerReady", "True");
  else balancer = make("LoadBalancerReady", "Unknown", "Uninitialized", facts.probe.message);

  const failed = [network, balancer].find((c) => c.status === "False");
  const waiting = [network, balancer].find((c) => c.status === "Unknown");
  const ready = failed
    ? make("Ready", "False", failed.reason, failed.message)
    : waiting
      ? make("Ready", "Unknown", waiting.reason, waiting.message)
      : make("Ready", "True");

  const balancers = { ingress: [{ domainInternal: facts.domainInternal }] };
  return {
    observedGeneration: ingress.metadata.generation ?? 0,
    conditions: [balancer, network, ready],
    ...(balancer.status === "True" ? { publicLoadBalancer: balancers, privateLoadBalancer: balancers } : {}),
  };
}

/** The status without transition times, to tell whether a write would change anything. */
export function statusSignature(status: KIngressStatus | undefined): string {
  if (!status) return "";
  const conditions = (status.conditions ?? [])
    .map(({ lastTransitionTime: _t, ...c }) => c)
    .sort((a, b) => (a.type < b.type ? -1 : 1));
  return canonical({ ...status, conditions });
}

/** JSON with object keys sorted (the API server returns them sorted, we write them in any order). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`)
      .join(",")}}`;
  return JSON.stringify(value);
}
