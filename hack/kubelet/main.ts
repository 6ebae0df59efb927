// The stand-in kubelet as a program:
//   node_modules/.bin/node hack/kubelet/main.ts [--kubeconfig FILE] [--node-name NAME] ...
// Runs until SIGTERM or SIGINT, then stops every sim it started and removes its network namespace.
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { createLogger } from "../../lib/log.ts";
import { startKubelet } from "./kubelet.ts";
import { loopbackNetwork, netnsNetwork, type PodNetwork } from "./pod-network.ts";

const usage = `Usage: node hack/kubelet/main.ts [flags]

A stand-in kubelet for tests: binds pods matching --selector to one fake node and runs, on the
pod's own IP, each container whose image is mapped as that local binary and an unmapped first
container as \`snooze sim\`, with the pod's ServiceAccount token in a kubeconfig ($KUBECONFIG).
See docs/kubernetes-testing.md.

Flags:
  --kubeconfig <file>     kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)
  --node-name <name>      the fake node (default snooze-stand-in)
  --selector <labels>     pods to run (default snooze.dev/stand-in=true)
  --pod-network <kind>    netns (own address per pod in a network namespace; needs root; pods
                          reach Services by name over HTTP through the kubelet's Service router,
                          their HTTP_PROXY) or loopback (127.1.x.y; Services get no endpoints).
                          Default: netns as root
  --pod-cidr <cidr>       /16 the netns mode takes a /24 from (default 10.213.0.0/16)
  --run-image <image>=<path>
                          run a container whose image is <image> as the binary <path> (repeatable;
                          e.g. Knative's queue-proxy); other sidecars are reported not running
  --log-dir <dir>         where each pod's output goes (default: a folder in the temp dir)
  -h, --help              show this help`;

async function main(): Promise<number> {
  let values: ReturnType<typeof parse>["values"];
  try {
    values = parse().values;
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${usage}`);
    return 2;
  }
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const networkKind = values["pod-network"] ?? (process.getuid?.() === 0 ? "netns" : "loopback");
  if (networkKind !== "netns" && networkKind !== "loopback") {
    console.error(`--pod-network must be netns or loopback\n\n${usage}`);
    return 2;
  }
  const images = new Map<string, string>();
  for (const mapping of values["run-image"] ?? []) {
    const at = mapping.indexOf("=");
    if (at <= 0 || at === mapping.length - 1) {
      console.error(`--run-image wants <image>=<path>, not ${mapping}\n\n${usage}`);
      return 2;
    }
    images.set(mapping.slice(0, at), mapping.slice(at + 1));
  }
  const log = createLogger({ component: "stand-in-kubelet" });
  const kc = new KubeConfig();
  if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
  else kc.loadFromDefault();
  const network: PodNetwork =
    networkKind === "netns"
      ? await netnsNetwork({ cidr: values["pod-cidr"] ?? "10.213.0.0/16" })
      : loopbackNetwork();
  let kubelet: Awaited<ReturnType<typeof startKubelet>>;
  try {
    kubelet = await startKubelet(kc, {
      nodeName: values["node-name"] ?? "snooze-stand-in",
      selector: values.selector ?? "snooze.dev/stand-in=true",
      network,
      logDir: values["log-dir"] ?? join(tmpdir(), `snooze-kubelet-${process.pid}`),
      images,
      log,
    });
  } catch (error) {
    await network.close();
    throw error;
  }
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"));
    process.once("SIGINT", () => resolve("SIGINT"));
  });
  log.info("stopping", { signal });
  await kubelet.stop();
  return 0;
}

function parse() {
  return parseArgs({
    options: {
      kubeconfig: { type: "string" },
      "node-name": { type: "string" },
      selector: { type: "string" },
      "pod-network": { type: "string" },
      "pod-cidr": { type: "string" },
      "log-dir": { type: "string" },
      "run-image": { type: "string", multiple: true },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
