import type { TestProject } from "vitest/node";
import { findKnative, knativeImages } from "./components/knative.ts";
import { findKnativeEventing, knativeEventingImages } from "./components/knative-eventing.ts";
import {
  type LocalControlPlane,
  startControlPlane,
  type TestCluster,
  useExistingCluster,
  usingExistingCluster,
} from "./harness/control-plane.ts";
import { type StandInKubelet, startStandInKubelet } from "./harness/stand-in-kubelet.ts";
import type { SuiteClusterInfo } from "./harness/suite.ts";

/**
 * Starts one control plane (or connects to the existing cluster) and one stand-in kubelet for the
 * whole e2e run, hands their coordinates to the test files, and stops them at the end.
 */
export default async function setup(project: TestProject) {
  const started = Date.now();
  const cluster: TestCluster = usingExistingCluster()
    ? await useExistingCluster()
    : await startControlPlane();
  let kubelet: StandInKubelet;
  try {
    // Knative's revision pods carry its queue-proxy, and Knative Eventing's PingSource adapter and
    // Broker data plane are pods of their own: the kubelet runs them as the binaries of the builds.
    const knative = findKnative();
    const eventing = findKnativeEventing();
    kubelet = await startStandInKubelet(cluster.kubeconfigPath, cluster.admin, cluster.dir, {
      images: {
        ...(knative ? knativeImages(knative) : {}),
        ...(eventing ? knativeEventingImages(eventing) : {}),
      },
    });
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  const current = cluster.admin.getCurrentCluster();
  const caPem = current?.caData ? Buffer.from(current.caData, "base64").toString() : "";
  const info: SuiteClusterInfo = {
    kind: cluster.kind,
    dir: cluster.dir,
    kubeconfigPath: cluster.kubeconfigPath,
    kubectl: cluster.kubectl,
    clientCA: cluster.clientCA,
    apiserverPid: cluster.kind === "local" ? (cluster as LocalControlPlane).apiserver.process.pid : undefined,
    server: current?.server ?? "",
    caPem,
    kubelet: {
      nodeName: kubelet.nodeName,
      schedulerName: kubelet.schedulerName,
      selector: kubelet.selector,
      network: kubelet.network,
    },
  };
  project.provide("snoozeCluster", info);
  console.log(
    `e2e: ${cluster.kind === "local" ? "control plane" : "existing cluster"} ready in ${Date.now() - started}ms ` +
      `(${info.server}, kubelet network ${kubelet.network}, work dir ${cluster.dir})`,
  );
  return async () => {
    await kubelet.stop();
    await cluster.stop();
  };
}
