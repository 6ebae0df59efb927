import { networkInterfaces } from "node:os";
import type { KubeClient } from "../../../lib/kube/client.ts";

/**
 * An address of this machine that EndpointSlices accept (not loopback, not link-local): where the
 * apiserver reaches a server the harness runs for a Service (KEDA's metrics adapter, Knative's
 * webhook) through that Service's endpoints (--enable-aggregator-routing).
 */
export function routableAddress(): string {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? [])
      if (a.family === "IPv4" && !a.internal && !a.address.startsWith("169.254.")) return a.address;
  throw new Error(
    "no non-loopback IPv4 address on this machine for the apiserver to reach a Service's endpoints",
  );
}

/**
 * Points the Service `service` at a server the harness runs on this machine: an EndpointSlice
 * (`<service>-e2e`, replaced if there) with one ready endpoint at `address:port`.
 */
export async function pointServiceAtHost(
  admin: KubeClient,
  target: { namespace: string; service: string; portName: string },
  address: string,
  port: number,
): Promise<void> {
  const slices = `/apis/discovery.k8s.io/v1/namespaces/${target.namespace}/endpointslices`;
  const name = `${target.service}-e2e`;
  await admin.delete(`${slices}/${name}`).catch(() => {});
  await admin.create(slices, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name,
      namespace: target.namespace,
      labels: {
        "kubernetes.io/service-name": target.service,
        "endpointslice.kubernetes.io/managed-by": "snooze-e2e",
      },
    },
    addressType: "IPv4",
    endpoints: [{ addresses: [address], conditions: { ready: true } }],
    ports: [{ name: target.portName, port, protocol: "TCP" }],
  });
}
