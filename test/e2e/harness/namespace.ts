import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";

/**
 * A namespace of the test's own, with a random suffix so reruns against an existing cluster never
 * collide. `remove` deletes it (and, through the namespace controller, everything in it).
 */
export async function createTestNamespace(
  kc: KubeConfig,
  prefix: string,
): Promise<{ name: string; remove(): Promise<void> }> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = `${prefix}-${Math.random().toString(36).slice(2, 7)}`;
  await core.createNamespace({ body: { metadata: { name, labels: { "snooze.dev/e2e": "true" } } } });
  return {
    name,
    async remove() {
      await core.deleteNamespace({ name }).catch(() => {});
    },
  };
}
