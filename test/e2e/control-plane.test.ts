import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { CoreV1Api, VersionApi } from "@kubernetes/client-node";
import { describe, expect, test } from "vitest";
import { repoRoot } from "./harness/assets.ts";
import { startControlPlane, usingExistingCluster } from "./harness/control-plane.ts";

const portOpen = (url: string) =>
  new Promise<boolean>((resolve) => {
    const { hostname, port } = new URL(url);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });

// Its own control plane, next to the suite's, so stopping it can be observed.
describe.skipIf(usingExistingCluster())("the test control plane", () => {
  test("starts (etcd, kube-apiserver with RBAC, controller-manager) and stops cleanly", async () => {
    const cp = await startControlPlane();
    try {
      const version = await cp.admin.makeApiClient(VersionApi).getCode();
      // The version stamped at build time: the pin of hack/kube-assets/kubernetes/go.mod.
      const goMod = readFileSync(join(repoRoot, "hack/kube-assets/kubernetes/go.mod"), "utf8");
      expect(version.gitVersion).toBe(/^\s*(?:require\s+)?k8s\.io\/kubernetes (v\S+)/m.exec(goMod)?.[1]);

      // The admin (system:masters) may do anything; a user without bindings may do nothing.
      await cp.admin.makeApiClient(CoreV1Api).listNamespace();
      const nobody = await cp.asUser("nobody");
      await expect(
        nobody.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default" }),
      ).rejects.toMatchObject({
        code: 403,
      });

      // The controllers run: the serviceaccount controller made the default ServiceAccount.
      const sa = await cp.admin.makeApiClient(CoreV1Api).readNamespacedServiceAccount({
        name: "default",
        namespace: "default",
      });
      expect(sa.metadata?.name).toBe("default");
    } finally {
      await cp.stop();
    }
    for (const part of [cp.etcd.process, cp.apiserver.process, cp.controllerManager!.process]) {
      expect(part.running(), `${part.name} still running`).toBe(false);
    }
    expect(await portOpen(cp.apiserver.url)).toBe(false);
    expect(await portOpen(cp.etcd.url)).toBe(false);
    // The work folder goes too, unless asked to keep it for its logs.
    expect(existsSync(cp.dir)).toBe(Boolean(process.env.SNOOZE_E2E_KEEP));
  });
});
