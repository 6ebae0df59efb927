import { networkInterfaces } from "node:os";

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
