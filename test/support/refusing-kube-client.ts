import { type KubeClient, KubeError } from "../../lib/kube/client.ts";

/**
 * A Kubernetes client for status writers' unit tests: each patch is refused with the next status in
 * `refuse` (as an API server that throttles with 429 or fails with 500 refuses it), then goes
 * through and is kept in `patches`. `refuse` may be added to while a test runs.
 */
export function refusingClient(refuse: number[]): { client: KubeClient; patches: unknown[] } {
  const patches: unknown[] = [];
  const client = {
    patch: async (_path: string, body: unknown) => {
      const status = refuse.shift();
      if (status !== undefined) throw new KubeError(status, "refused", `refused with ${status}`);
      patches.push(body);
      return body;
    },
  } as unknown as KubeClient;
  return { client, patches };
}
