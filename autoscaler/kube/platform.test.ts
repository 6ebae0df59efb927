import { describe, expect, test } from "vitest";
import { type KubeClient, KubeError } from "../../lib/kube/client.ts";
import type { Informer } from "../../lib/kube/informer.ts";
import type { KubeModel } from "../../lib/kube/model-config.ts";
import { deletionCostAnnotation, type Pod } from "../../lib/kube/pod-replica.ts";
import type { Replica } from "../platform.ts";
import { KubePlatform, stoppingCost, WriteConflict } from "./platform.ts";

/**
 * A Deployment's scale subresource and its pods with the apiserver's optimistic concurrency: a
 * write carrying an old resourceVersion gets 409. `between` runs after each read of the scale, as
 * the Deployment controller's status writes do.
 */
class FakeDeployment {
  replicas = 3;
  version = 10;
  replaced: number[] = [];
  costs = new Map<string, string>();
  between: () => void = () => {};
  client(): KubeClient {
    return {
      get: async (path: string) => {
        if (path.endsWith("/scale")) {
          const read = {
            metadata: { resourceVersion: String(this.version) },
            spec: { replicas: this.replicas },
          };
          this.between();
          return read;
        }
        const name = path.split("/").pop()!;
        return { metadata: { name, namespace: "ns", resourceVersion: "1" } };
      },
      patch: async (path: string, body: Pod) => {
        this.costs.set(path.split("/").pop()!, body.metadata.annotations![deletionCostAnnotation]!);
        return body;
      },
      replace: async (
        _path: string,
        body: { metadata: { resourceVersion: string }; spec: { replicas: number } },
      ) => {
        if (body.metadata.resourceVersion !== String(this.version))
          throw new KubeError(
            409,
            "Conflict",
            "the object has been modified; please apply your changes to the latest version",
          );
        this.version++;
        this.replicas = body.spec.replicas;
        this.replaced.push(body.spec.replicas);
        return body;
      },
    } as unknown as KubeClient;
  }
  /** The Deployment controller records the new status: the count stays, the version moves. */
  statusWrite(): void {
    this.version++;
  }
}

const model = {
  key: "ns/qwen",
  namespace: "ns",
  name: "qwen",
  spec: { port: 8000, workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" } },
} as unknown as KubeModel;

const replica = (id: string): Replica => ({
  id,
  label: `pod ${id}`,
  uid: id,
  up: true,
  createdAt: 0,
  restarts: 0,
  node: "n",
});

function platformOn(deployment: FakeDeployment): KubePlatform {
  const pods = { get: () => undefined, list: () => [] } as unknown as Informer<Pod>;
  const platform = new KubePlatform({
    client: deployment.client(),
    pods,
    workload: () => ({ replicas: deployment.replicas, selector: "app=qwen", scalable: true }),
  });
  platform.setModel(model);
  return platform;
}

describe("KubePlatform.scale", () => {
  test("a 409 from the Deployment controller's status write (the count unchanged) is read again and the scale goes through", async () => {
    const deployment = new FakeDeployment();
    let writes = 2;
    deployment.between = () => {
      if (writes-- > 0) deployment.statusWrite();
    };
    await platformOn(deployment).scale(model.key, 3, 2, [replica("qwen-a")]);
    expect(deployment.replaced).toEqual([2]);
    expect(deployment.costs.get("qwen-a")).toBe(String(stoppingCost));
  });

  test("a count changed by someone else is a WriteConflict, never overwritten", async () => {
    const deployment = new FakeDeployment();
    deployment.between = () => {
      deployment.statusWrite();
      deployment.replicas = 5;
    };
    await expect(platformOn(deployment).scale(model.key, 3, 2, [])).rejects.toThrow(
      new WriteConflict("Deployment qwen has 5 replicas, not 3"),
    );
    expect(deployment.replaced).toEqual([]);
  });

  test("a Deployment that never stops changing is given up after a few tries, as a WriteConflict", async () => {
    const deployment = new FakeDeployment();
    deployment.between = () => deployment.statusWrite();
    await expect(platformOn(deployment).scale(model.key, 3, 2, [])).rejects.toThrow(
      /kept changing while scaling/,
    );
    expect(deployment.replicas).toBe(3);
  });
});
