import { join } from "node:path";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { repoRoot } from "./assets.ts";
import { type ManagedProcess, startProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

export interface StandInKubelet {
  nodeName: string;
  /** The label pods need for this kubelet to run them. */
  selector: { key: string; value: string };
  /** The scheduler name pods should carry so a real cluster's scheduler leaves them alone. */
  schedulerName: string;
  network: "netns" | "loopback";
  process: ManagedProcess;
  stop(): Promise<void>;
}

/**
 * Starts hack/kubelet as its own process (the same program a person runs by hand) against the
 * kubeconfig at `kubeconfigPath`, and waits until it watches pods and its node is Ready.
 */
export async function startStandInKubelet(
  kubeconfigPath: string,
  admin: KubeConfig,
  dir: string,
  options: {
    nodeName?: string;
    network?: "netns" | "loopback";
    selectorValue?: string;
    /** Images and the local binary each runs as (`--run-image`), e.g. Knative's queue-proxy. */
    images?: Record<string, string>;
  } = {},
): Promise<StandInKubelet> {
  const nodeName = options.nodeName ?? "snooze-stand-in";
  const network = options.network ?? (process.getuid?.() === 0 ? "netns" : "loopback");
  const selector = { key: "snooze.dev/stand-in", value: options.selectorValue ?? "true" };
  const child = startProcess(
    "stand-in-kubelet",
    process.execPath,
    [
      join(repoRoot, "hack/kubelet/main.ts"),
      `--kubeconfig=${kubeconfigPath}`,
      `--node-name=${nodeName}`,
      `--selector=${selector.key}=${selector.value}`,
      `--pod-network=${network}`,
      `--log-dir=${join(dir, "pods")}`,
      ...Object.entries(options.images ?? {}).map(([image, path]) => `--run-image=${image}=${path}`),
    ],
    { logPath: join(dir, "stand-in-kubelet.log"), cwd: repoRoot },
  );
  const core = admin.makeApiClient(CoreV1Api);
  await waitFor(
    async () => {
      // Its own log line first: on a reused cluster the node may still be Ready from an earlier run.
      if (!child.tail(200).includes("stand-in kubelet running")) return undefined;
      const node = await core.readNode({ name: nodeName });
      return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")
        ? true
        : undefined;
    },
    {
      what: `the stand-in kubelet's node ${nodeName}`,
      timeoutMs: 30_000,
      intervalMs: 200,
      abort: child.exited,
      detail: () => child.tail(),
    },
  );
  return {
    nodeName,
    selector,
    schedulerName: "snooze-stand-in",
    network,
    process: child,
    stop: () => child.stop(15_000),
  };
}
