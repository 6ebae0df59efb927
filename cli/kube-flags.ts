import { networkInterfaces } from "node:os";
import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { KubeClient } from "../lib/kube/client.ts";
import { loadKubeConfig } from "../lib/kube/kubeconfig.ts";
import { redactUrl } from "../lib/redact-url.ts";

/** Flags the Kubernetes components share. */
export const kubeFlags: Record<string, Flag> = {
  kubeconfig: {
    type: "string",
    description: "kubeconfig file (development); default: $KUBECONFIG, else the pod's ServiceAccount",
    placeholder: "file",
  },
  namespace: {
    type: "string",
    description: "watch only this namespace (default: all namespaces)",
    placeholder: "name",
  },
};

/** This machine's first non-internal IPv4 address (a pod's IP when POD_IP is not set). */
export function ownAddress(): string {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return "127.0.0.1";
}

/**
 * The API client of `--kubeconfig` (or in-cluster credentials), and where its credentials came from;
 * its writes name `snooze-<component>` as their field manager.
 */
export async function kubeClientFrom(
  values: FlagValues,
  component: "activator" | "autoscaler" | "webhooks",
): Promise<{ client: KubeClient; source: string }> {
  let loaded: ReturnType<typeof loadKubeConfig>;
  try {
    loaded = loadKubeConfig(values.kubeconfig as string | undefined);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const client = await KubeClient.fromKubeConfig(loaded.kc, { fieldManager: `snooze-${component}` });
  return { client, source: loaded.source };
}

/**
 * An http(s) URL another component is called at (`--autoscaler-url`, `--advertise-address`), without
 * its trailing slash, or a usage error naming `source`. Found by an outside tester: `x` was taken,
 * and every demand sent to it then failed, the requests held until their hold budget ran out.
 */
export function httpUrlValue(text: string, source: string): string {
  const parsed = URL.canParse(text) ? new URL(text) : undefined;
  if (parsed?.protocol !== "http:" && parsed?.protocol !== "https:")
    throw new UsageError(
      `${source} must be an http(s) URL, such as http://snooze-autoscaler.snooze-system.svc:8090, not "${redactUrl(text)}"`,
    );
  return text.replace(/\/$/, "");
}

/**
 * This replica's name: `--identity`, else `$POD_NAME` (set but empty is unset), else `fallback`. An
 * empty `--identity` is refused (found by an outside tester: it was taken): a Lease whose holder is
 * "" is one nobody holds, so another replica takes it while this one still acts on it.
 */
export function identityValue(values: FlagValues, fallback: () => string): string {
  if (values.identity === "")
    throw new UsageError("--identity is empty: name this replica (default: $POD_NAME, else the host name)");
  return String(values.identity ?? (process.env.POD_NAME || fallback()));
}
