import type { IncomingHttpHeaders } from "node:http";
import { type HostRouter, routeByHost } from "../../activator/host-routing.ts";
import type { KIngress } from "../../lib/knative/ingress-class.ts";
import { compileHostTable, type HostTable, normalizeHost } from "../../lib/knative/ingress-routes.ts";

/**
 * The activator's host router over a table compiled from KIngress objects the test sets, as
 * activator/kube-ingresses.ts compiles it from its watch (the same pure functions), without a
 * Kubernetes API. `models` maps a revision's `namespace/name` to its Model's id.
 */
export class TableHosts implements HostRouter {
  table: HostTable = compileHostTable([]);
  private readonly models: Map<string, string>;
  constructor(models: Map<string, string>) {
    this.models = models;
  }
  set(ingresses: KIngress[]): void {
    this.table = compileHostTable(ingresses);
  }
  route(host: string | undefined, path: string, headers: IncomingHttpHeaders) {
    return routeByHost(this.table, (ns, name) => this.models.get(`${ns}/${name}`), host, path, headers);
  }
  hosts(): string[] {
    return [...this.table.hosts.keys()];
  }
  version(host: string | undefined): string | undefined {
    return this.table.hosts.get(normalizeHost(host))?.version;
  }
}
