import type { V1Container, V1Pod } from "@kubernetes/client-node";

/** How the stand-in kubelet runs a pod: one `snooze sim` process for its first container. */
export interface SimLaunch {
  container: string;
  /** Arguments after `snooze sim`. */
  args: string[];
  env: Record<string, string>;
  port: number;
  readiness: ReadinessCheck;
}

export interface ReadinessCheck {
  path: string;
  port: number;
  periodMs: number;
  initialDelayMs: number;
  failureThreshold: number;
}

/**
 * Translates a pod into a sim launch. There are no images, so the container's `command` (the
 * image entrypoint, e.g. `vllm serve`) is not run; its `args` go to `snooze sim`, which takes vLLM's
 * flag names and positional model. `--host` is always the pod IP; the port is `--port` from the
 * args, else the first containerPort, else vLLM's 8000. Readiness follows the HTTP readinessProbe
 * when there is one, else `GET /health` on the port every second.
 */
export function simLaunch(pod: V1Pod): SimLaunch {
  const container = pod.spec?.containers[0];
  if (!container) throw new Error("the pod has no containers");
  const args = [...(container.args ?? [])];
  if (args[0] === "serve") args.shift();
  const withoutHost = dropFlag(args, "--host");
  const portArg = flagValue(withoutHost, "--port");
  const port = portArg !== undefined ? Number(portArg) : (container.ports?.[0]?.containerPort ?? 8000);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`invalid port ${portArg}`);
  const simArgs = portArg !== undefined ? withoutHost : [...withoutHost, "--port", String(port)];
  return {
    container: container.name,
    args: simArgs,
    env: literalEnv(container),
    port,
    readiness: readiness(container, port),
  };
}

function readiness(container: V1Container, port: number): ReadinessCheck {
  const probe = container.readinessProbe;
  const get = probe?.httpGet;
  if (probe && !get) {
    throw new Error("only httpGet readiness probes are supported by the stand-in kubelet");
  }
  let probePort = port;
  if (get) {
    const named = container.ports?.find((p) => p.name === get.port)?.containerPort;
    probePort = typeof get.port === "number" ? get.port : (named ?? Number(get.port));
    if (!Number.isInteger(probePort))
      throw new Error(`readinessProbe port ${get.port} is not a port of the container`);
  }
  return {
    path: get?.path ?? "/health",
    port: probePort,
    periodMs: (probe?.periodSeconds ?? 1) * 1_000,
    initialDelayMs: (probe?.initialDelaySeconds ?? 0) * 1_000,
    failureThreshold: probe?.failureThreshold ?? 3,
  };
}

/** Env entries with a literal value; valueFrom (secrets, field refs) needs a real kubelet. */
function literalEnv(container: V1Container): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of container.env ?? []) if (entry.value !== undefined) env[entry.name] = entry.value;
  return env;
}

function flagValue(args: string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === flag) return args[i + 1];
    if (arg.startsWith(`${flag}=`)) return arg.slice(flag.length + 1);
  }
  return undefined;
}

function dropFlag(args: string[], flag: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === flag) {
      i++;
      continue;
    }
    if (arg.startsWith(`${flag}=`)) continue;
    out.push(arg);
  }
  return out;
}
