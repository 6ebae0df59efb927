import type { IncomingHttpHeaders } from "node:http";
import { isSnoozeIngress, type KIngress, knativeIngressPath } from "../lib/knative/ingress-class.ts";
import {
  compileHostTable,
  emptyHostTable,
  type HostTable,
  normalizeHost,
} from "../lib/knative/ingress-routes.ts";
import type { KubeClient } from "../lib/kube/client.ts";
import type { Informer } from "../lib/kube/informer.ts";
import { kubeInformer } from "../lib/kube/list-watch.ts";
import type { Logger } from "../lib/log.ts";
import { type HostRouter, type HostRouting, routeByHost } from "./host-routing.ts";

export interface KubeIngressesOptions {
  client: KubeClient;
  /** Only this namespace's KIngresses; all when absent. */
  namespace?: string;
  log: Logger;
  /** The model id of the Model `namespace/name`, when this activator routes it. */
  modelOf(namespace: string, name: string): string | undefined;
  informer?: { resyncMs?: number; staleMs?: number };
}

/**
 * The KIngresses of Snooze's class, as an activator routes them: a watch (the same way the
 * activator learns Models and pods), compiled into one host table that is replaced whole on every
 * change, so a new split takes effect for all its hosts at once.
 */
export class KubeIngresses implements HostRouter {
  readonly informer: Informer<KIngress>;
  private readonly options: KubeIngressesOptions;
  private table: HostTable = emptyHostTable;
  private rebuildQueued = false;

  constructor(options: KubeIngressesOptions) {
    this.options = options;
    this.informer = kubeInformer<KIngress>(options.client, knativeIngressPath(options.namespace), {
      name: "ingresses.networking.internal.knative.dev",
      log: options.log,
      ...options.informer,
    });
  }

  async start(): Promise<void> {
    // One rebuild for a burst of events: a list (the first, or after a 410) delivers every
    // KIngress as its own event in one turn, and compiling the whole table for each was quadratic.
    const rebuild = () => {
      if (this.rebuildQueued) return;
      this.rebuildQueued = true;
      queueMicrotask(() => {
        this.rebuildQueued = false;
        this.rebuild();
      });
    };
    // Status writes (the reconciler's) change no route: only the spec (generation) and the class do.
    const routed = (i: KIngress) =>
      JSON.stringify([i.metadata.generation, i.metadata.annotations, i.metadata.deletionTimestamp]);
    this.informer.on({
      add: rebuild,
      update: (i, old) => i !== old && routed(i) !== routed(old) && rebuild(),
      delete: rebuild,
    });
    await this.informer.start();
    this.rebuild();
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }

  route(host: string | undefined, path: string, headers: IncomingHttpHeaders): HostRouting {
    return routeByHost(this.table, this.options.modelOf, host, path, headers);
  }

  hosts(): string[] {
    return [...this.table.hosts.keys()].sort();
  }

  version(host: string | undefined): string | undefined {
    return this.table.hosts.get(normalizeHost(host))?.version;
  }

  private rebuild(): void {
    const compiled = compileHostTable(this.informer.list().filter(isSnoozeIngress));
    // A host whose KIngress did not change keeps its routes, and with them each path's round robin.
    const hosts = new Map(compiled.hosts);
    for (const [host, route] of hosts) {
      const before = this.table.hosts.get(host);
      if (before && before.ingress === route.ingress && before.version === route.version)
        hosts.set(host, before);
    }
    const table: HostTable = { hosts, conflicts: compiled.conflicts };
    for (const conflict of table.conflicts)
      if (!this.table.conflicts.some((c) => c.host === conflict.host && c.refused === conflict.refused))
        this.options.log.warn("two KIngresses claim a host; the older one keeps it", conflict);
    this.table = table;
  }
}
