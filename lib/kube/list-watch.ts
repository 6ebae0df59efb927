import type { KubeClient, KubeList } from "./client.ts";
import { Informer, type InformerOptions, type ListWatch } from "./informer.ts";

export interface Selectors {
  labelSelector?: string;
  fieldSelector?: string;
}

/**
 * List+watch of a collection path (`/api/v1/pods`, `/apis/snooze.dev/v1alpha1/models`, ...):
 * paged lists, watches with bookmarks that the server ends after about a minute (so a stream is
 * never silent for long and the watchdog can tell a dead one).
 */
export function kubeListWatch<T>(client: KubeClient, path: string, selectors: Selectors = {}): ListWatch<T> {
  const query: Record<string, string> = {};
  if (selectors.labelSelector) query.labelSelector = selectors.labelSelector;
  if (selectors.fieldSelector) query.fieldSelector = selectors.fieldSelector;
  return {
    async list(signal) {
      const items: T[] = [];
      let next: string | undefined;
      let resourceVersion = "";
      for (let page = 0; page < 10_000; page++) {
        const answer: KubeList<T> = await client.list<T>(
          path,
          { ...query, limit: "500", ...(next ? { continue: next } : {}) },
          signal,
        );
        items.push(...answer.items);
        resourceVersion = answer.metadata.resourceVersion;
        next = answer.metadata.continue;
        if (!next) break;
      }
      return { items, resourceVersion };
    },
    watch(resourceVersion, onEvent, signal) {
      const timeoutSeconds = String(50 + Math.floor(Math.random() * 20));
      return client.watch<T>(
        path,
        { ...query, resourceVersion, allowWatchBookmarks: "true", timeoutSeconds },
        onEvent,
        signal,
      );
    },
  };
}

/** An informer over a collection path of the API. */
export function kubeInformer<T>(
  client: KubeClient,
  path: string,
  options: Omit<InformerOptions<T>, "source"> & Selectors,
): Informer<T> {
  const { labelSelector, fieldSelector, ...rest } = options;
  return new Informer<T>({
    ...rest,
    source: kubeListWatch<T>(client, path, { labelSelector, fieldSelector }),
  });
}
