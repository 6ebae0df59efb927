import { isNotFound, type KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { knativeIngressGroup, knativeIngressVersion } from "./ingress-class.ts";

/**
 * Whether the API serves Knative's KIngress (Knative Serving is installed). Apart from
 * ingress-class.ts, whose names the activator's HTTP surface uses in every mode: this loads the
 * Kubernetes client, which `snooze serve` never does.
 */
export async function knativeNetworkingServed(client: KubeClient, log: Logger): Promise<boolean> {
  try {
    await client.get(`/apis/${knativeIngressGroup}/${knativeIngressVersion}`);
    return true;
  } catch (error) {
    if (!isNotFound(error)) log.warn("could not tell whether Knative's networking API is served", { error });
    return false;
  }
}
