import { isNotFound, type KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { knativeIngressGroup, knativeIngressVersion } from "./ingress-class.ts";

/**
 * Whether the API serves this Knative group version (that part of Knative is installed): a 404 says
 * no; any other failure says no too, with a warning. Apart from ingress-class.ts, whose names the
 * activator's HTTP surface uses in every mode: this loads the Kubernetes client, which
 * `snooze serve` never does.
 */
export async function knativeApiServed(
  client: KubeClient,
  api: { group: string; version: string },
  log: Logger,
): Promise<boolean> {
  try {
    await client.get(`/apis/${api.group}/${api.version}`);
    return true;
  } catch (error) {
    if (!isNotFound(error))
      log.warn(`could not tell whether ${api.group}/${api.version} is served`, { error });
    return false;
  }
}

/** Whether the API serves Knative's KIngress (Knative Serving's networking layer is installed). */
export const knativeNetworkingServed = (client: KubeClient, log: Logger): Promise<boolean> =>
  knativeApiServed(client, { group: knativeIngressGroup, version: knativeIngressVersion }, log);
