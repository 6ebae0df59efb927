import { request } from "undici";
import { probeHashHeader, probeHeader, probeValue } from "../../../lib/knative/ingress-class.ts";
import type { KubeClient } from "../../../lib/kube/client.ts";

/**
 * Knative's way of knowing a data plane serves a KIngress (knative.dev/networking pkg/status):
 * ask every proxy, as the host, with `K-Network-Probe: probe`, and wait until each answers 200 with
 * the expected version in `K-Network-Hash`. Here each proxy is an activator, which learns the
 * KIngress from its own watch; the KIngress is Ready only once all of them route its generation,
 * so the Route moves traffic only when every activator has the new splits.
 */
export type ProbeOutcome = { ready: true } | { ready: false; message: string };

export async function probeActivators(
  activators: readonly string[],
  host: string,
  version: string,
  timeoutMs = 2_000,
): Promise<ProbeOutcome> {
  if (activators.length === 0) return { ready: false, message: "No activator endpoints to probe yet." };
  const answers = await Promise.all(
    activators.map(async (base) => {
      try {
        // undici's request: fetch would not send our Host.
        const answer = await request(`${base}/healthz`, {
          headers: { host, [probeHeader]: probeValue, "user-agent": "Snooze-Ingress-Probe" },
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        await answer.body.dump();
        const served = answer.headers[probeHashHeader];
        if (answer.statusCode === 200 && served === version) return undefined;
        return `${base} answered ${answer.statusCode}${served ? ` with version ${served}` : ""}`;
      } catch (error) {
        return `${base}: ${(error as Error).message}`;
      }
    }),
  );
  const behind = answers.filter((a): a is string => a !== undefined);
  if (behind.length === 0) return { ready: true };
  return {
    ready: false,
    message: `Waiting for ${behind.length} of ${activators.length} activators to route generation ${version.split("/")[1]} of ${host} (${behind.slice(0, 3).join("; ")}).`,
  };
}

interface EndpointSlice {
  ports?: { name?: string; port?: number }[];
  endpoints?: { addresses?: string[]; conditions?: { ready?: boolean; terminating?: boolean } }[];
}

/**
 * The activators behind a Service: the ready endpoints of its EndpointSlices, on the port named
 * `http` (else the slice's first port), as base URLs.
 */
export async function serviceActivators(
  client: KubeClient,
  namespace: string,
  service: string,
): Promise<string[]> {
  const slices = await client.list<EndpointSlice>(
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
    { labelSelector: `kubernetes.io/service-name=${service}` },
  );
  const urls = new Set<string>();
  for (const slice of slices.items) {
    const port = (slice.ports?.find((p) => p.name === "http") ?? slice.ports?.[0])?.port;
    if (!port) continue;
    for (const endpoint of slice.endpoints ?? []) {
      if (endpoint.conditions?.ready === false) continue;
      for (const address of endpoint.addresses ?? [])
        urls.add(`http://${address.includes(":") ? `[${address}]` : address}:${port}`);
    }
  }
  return [...urls].sort();
}
