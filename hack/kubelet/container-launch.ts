import type { V1Container, V1EnvVar, V1Pod } from "@kubernetes/client-node";
import { hostFlag, portFlag, readAs, type VllmFlag, vllmFlagValue } from "../../lib/vllm-flag.ts";

/** How the stand-in kubelet runs one container of a pod. */
export interface ContainerLaunch {
  name: string;
  image: string;
  /**
   * What runs: a container whose image is mapped (`--run-image`) as that local binary, else the
   * first container as `snooze sim` (args after `sim`), else nothing, with the reason for the pod
   * status.
   */
  program:
    | { kind: "sim"; args: string[] }
    | { kind: "binary"; path: string; args: string[] }
    | { kind: "unrunnable"; reason: string; message: string }
    /** An image no registry can ever serve (its host is under `.invalid`): why its pull fails. */
    | { kind: "unpullable"; message: string };
  env: Record<string, string>;
  /**
   * Env entries from a Secret's key (`valueFrom.secretKeyRef` with a name): read from the API when
   * the container starts; a Secret or key that is not there fails its start as the kubelet does
   * (`CreateContainerConfigError`) unless the entry is optional.
   */
  secretEnv?: SecretEnv[];
  /** `terminationMessagePolicy: FallbackToLogsOnError`: a failed exit's message is its log's tail. */
  logsOnError?: boolean;
  /** The readiness check; undefined: ready once running, as the kubelet does without a probe. */
  readiness?: ReadinessCheck;
}

export interface SecretEnv {
  env: string;
  secret: string;
  key: string;
  optional: boolean;
}

export interface ReadinessCheck {
  path: string;
  /** The probe's `scheme`: HTTPS for a webhook that serves only TLS (Knative's in-memory channel controller). */
  scheme: "HTTP" | "HTTPS";
  port: number;
  headers: Record<string, string>;
  periodMs: number;
  initialDelayMs: number;
  failureThreshold: number;
}

/** What the downward API (`valueFrom.fieldRef`) of a pod's env may name, known once it is placed. */
export interface PodPlacement {
  podIP: string;
  hostIP: string;
  nodeName: string;
}

/**
 * Translates a pod into the processes to run, one per container. There are no images:
 *
 * - A container whose image `images` maps runs that binary, first or not (below).
 * - Else the first container is the model server. Its `command` (the image entrypoint, e.g. `vllm
 *   serve`) is not run; its `args` go to `snooze sim`, which takes vLLM's flag names and positional
 *   model. The port is `--port` from the args, else the first containerPort, else vLLM's 8000.
 *   Readiness follows the HTTP readinessProbe when there is one, else `GET /health` on the port
 *   every second (a sim is ready when its engine is).
 * - A later container (a sidecar such as Knative's queue-proxy) runs the binary that `images` maps
 *   its image to, with its args and env; readiness follows its HTTP readinessProbe (headers too),
 *   else it is ready once running. An image that is not mapped cannot run here: the container is
 *   reported waiting with the reason, and the pod never becomes Ready.
 *
 * Env: literal values (an entry without one is set empty), and the downward API fields a kubelet fills (`metadata.name`, `.namespace`,
 * `.uid`, `spec.nodeName`, `spec.serviceAccountName`, `status.podIP`, `status.hostIP`); a Secret's
 * key (`secretKeyRef` naming a Secret) is listed in `secretEnv`, for the kubelet to read when it
 * starts the container. Other `valueFrom` sources (ConfigMaps, resources) are left out.
 */
export function containerLaunches(
  pod: V1Pod,
  placement: PodPlacement,
  images: ReadonlyMap<string, string> = new Map(),
): ContainerLaunch[] {
  const containers = pod.spec?.containers ?? [];
  if (containers.length === 0) throw new Error("the pod has no containers");
  return containers.map((container, index) => {
    const secretEnv = (container.env ?? []).flatMap((entry): SecretEnv[] => {
      const ref = entry.valueFrom?.secretKeyRef;
      return ref?.name
        ? [{ env: entry.name, secret: ref.name, key: ref.key, optional: ref.optional === true }]
        : [];
    });
    return { ...launchOf(container, index), ...(secretEnv.length > 0 ? { secretEnv } : {}) };
  });

  function launchOf(container: V1Container, index: number): ContainerLaunch {
    const env = podEnv(pod, container, placement);
    const host = registryHost(container.image ?? "");
    if (host?.endsWith(".invalid")) {
      // RFC 2606 reserves .invalid: no resolver ever answers for it, so a real kubelet fails this
      // pull for sure, and so does this one, in the words of containerd's resolver.
      const image = container.image!;
      return {
        name: container.name,
        image,
        program: {
          kind: "unpullable",
          message:
            `failed to pull and unpack image "${image}": failed to resolve reference "${image}": ` +
            `failed to do request: Head "https://${host}/v2/...": dial tcp: lookup ${host}: no such host`,
        },
        env,
      };
    }
    const path = images.get(container.image ?? "");
    if (index === 0 && path === undefined) return simContainer(container, env);
    if (path === undefined) {
      return {
        name: container.name,
        image: container.image ?? "",
        program: {
          kind: "unrunnable",
          reason: "ErrImageNeverPull",
          message:
            `the stand-in kubelet runs the first container as snooze sim and a later one only when ` +
            `its image is mapped to a binary (--run-image ${container.image}=<path>); it is not`,
        },
        env,
      };
    }
    if (container.command !== undefined && container.command.length > 0) {
      return {
        name: container.name,
        image: container.image ?? "",
        program: {
          kind: "unrunnable",
          reason: "CreateContainerError",
          message: `the stand-in kubelet runs the binary ${container.image} is mapped to as its entrypoint; a command cannot replace it`,
        },
        env,
      };
    }
    return {
      name: container.name,
      image: container.image ?? "",
      program: { kind: "binary", path, args: [...(container.args ?? [])] },
      env,
      readiness: container.readinessProbe ? readiness(container, undefined) : undefined,
    };
  }
}

function simContainer(container: V1Container, env: Record<string, string>): ContainerLaunch {
  const args = [...(container.args ?? [])];
  if (args[0] === "serve") args.shift();
  // Read as vLLM reads them (lib/vllm-flag.ts): the args are a `vllm serve` command line.
  const withoutHost = dropFlag(args, hostFlag);
  const portArg = vllmFlagValue(withoutHost, portFlag);
  const port = portArg !== undefined ? Number(portArg) : (container.ports?.[0]?.containerPort ?? 8000);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`invalid port ${portArg}`);
  const simArgs = portArg !== undefined ? withoutHost : [...withoutHost, "--port", String(port)];
  return {
    name: container.name,
    image: container.image ?? "",
    program: { kind: "sim", args: simArgs },
    env,
    readiness: readiness(container, port),
    ...(container.terminationMessagePolicy === "FallbackToLogsOnError" ? { logsOnError: true } : {}),
  };
}

/**
 * The registry host an image reference names (lowercase, without its port), or undefined for one
 * on the default registry: as in Docker's reference grammar, the first path component is a host
 * when it has a `.` or a `:`, or is `localhost`.
 */
export function registryHost(image: string): string | undefined {
  const slash = image.indexOf("/");
  if (slash < 0) return undefined;
  const first = image.slice(0, slash);
  if (!first.includes(".") && !first.includes(":") && first !== "localhost") return undefined;
  return first.replace(/:\d+$/, "").toLowerCase();
}

/** The container's HTTP readiness probe; `defaultPort` set: `GET /health` there without one. */
function readiness(container: V1Container, defaultPort: number | undefined): ReadinessCheck {
  const probe = container.readinessProbe;
  const get = probe?.httpGet;
  if (probe && !get) {
    throw new Error(
      `container ${container.name}: only httpGet readiness probes are supported by the stand-in kubelet`,
    );
  }
  let probePort = defaultPort ?? 0;
  if (get) {
    const named = container.ports?.find((p) => p.name === get.port)?.containerPort;
    probePort = typeof get.port === "number" ? get.port : (named ?? Number(get.port));
    if (!Number.isInteger(probePort))
      throw new Error(`container ${container.name}: readinessProbe port ${get.port} is not a port of it`);
  }
  return {
    path: get?.path || (get ? "/" : "/health"),
    scheme: get?.scheme === "HTTPS" ? "HTTPS" : "HTTP",
    port: probePort,
    headers: Object.fromEntries((get?.httpHeaders ?? []).map((h) => [h.name, h.value])),
    periodMs: (probe?.periodSeconds ?? 1) * 1_000,
    initialDelayMs: (probe?.initialDelaySeconds ?? 0) * 1_000,
    failureThreshold: probe?.failureThreshold ?? 3,
  };
}

function podEnv(pod: V1Pod, container: V1Container, placement: PodPlacement): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of container.env ?? []) {
    // No value and no source is the empty string, as the kubelet sets it (the API drops `value: ""`).
    const value = entry.valueFrom ? fieldValue(pod, entry, placement) : (entry.value ?? "");
    if (value !== undefined) env[entry.name] = value;
  }
  return env;
}

function fieldValue(pod: V1Pod, entry: V1EnvVar, placement: PodPlacement): string | undefined {
  switch (entry.valueFrom?.fieldRef?.fieldPath) {
    case "metadata.name":
      return pod.metadata?.name;
    case "metadata.namespace":
      return pod.metadata?.namespace;
    case "metadata.uid":
      return pod.metadata?.uid;
    case "spec.nodeName":
      return placement.nodeName;
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName ?? "default";
    case "status.podIP":
      return placement.podIP;
    case "status.hostIP":
      return placement.hostIP;
    default:
      return undefined;
  }
}

function dropFlag(args: string[], flag: VllmFlag): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const as = readAs(arg, flag);
    if (as && as.inline === undefined) {
      i++;
      continue;
    }
    if (as) continue;
    out.push(arg);
  }
  return out;
}
