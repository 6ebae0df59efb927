import { networkInterfaces } from "node:os";
import { parseDuration } from "../lib/duration.ts";
import type { Flag, FlagValues } from "./command.ts";
import { UsageError } from "./command.ts";

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

export function portFlag(values: FlagValues): number {
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535)
    throw new UsageError(`--port must be a port number, not "${values.port}"`);
  return port;
}

export function durationFlag(values: FlagValues, name: string): number {
  const ms = parseDuration(String(values[name]));
  if (ms === undefined) throw new UsageError(`--${name} must be a duration like 2s, not "${values[name]}"`);
  return ms;
}

/** This machine's first non-internal IPv4 address (a pod's IP when POD_IP is not set). */
export function ownAddress(): string {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return "127.0.0.1";
}
