import type { IncomingHttpHeaders } from "node:http";
import { chooseSplit, type HostTable, matchHost } from "../lib/knative/ingress-routes.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/** How a request is routed by its Host (Snooze's Knative ingress class). */
export type HostRouting =
  /** No KIngress names the host: routed as before, by the body's `model`. */
  | { kind: "none" }
  /** A split of a KIngress chose this model; these headers go to the engine with the request. */
  | { kind: "model"; model: string; revision: string; headers: Record<string, string> }
  | { kind: "refused"; status: number; error: OpenAIErrorBody };

/** What the activator asks of whoever knows the KIngresses. */
export interface HostRouter {
  route(host: string | undefined, path: string, headers: IncomingHttpHeaders): HostRouting;
  /** The hosts routed (for the message of an unknown host). */
  hosts(): string[];
  /** The KIngress version this activator serves for a host, for Knative's readiness probe. */
  version(host: string | undefined): string | undefined;
}

/**
 * **Pure** but for the chosen path's round robin: a request's Host, path and headers → the model
 * that takes it. A split names a revision (`serviceNamespace`/`serviceName`); a Snooze-class
 * revision has a Model of the same name in its namespace, whose route holds the request while the
 * revision is cold or asleep. A revision without a Model is refused with 503: Snooze's ingress
 * routes only through Snooze's activator machinery, so a revision Knative's own autoscaler scales
 * belongs on Knative's own networking layer (the ingress reconciler says so in the KIngress status).
 */
export function routeByHost(
  table: HostTable,
  modelOf: (namespace: string, name: string) => string | undefined,
  host: string | undefined,
  path: string,
  headers: IncomingHttpHeaders,
): HostRouting {
  const match = matchHost(table, host, path, headers);
  if (match.kind === "none") return { kind: "none" };
  if (match.kind === "no-path")
    return {
      kind: "refused",
      status: 404,
      error: openAIError(
        `The Knative route for \`${match.host}\` (KIngress ${match.route.ingress}) has no path for ${path.split("?")[0]} with these headers.`,
        "invalid_request_error",
        "route_not_found",
      ),
    };
  const split = chooseSplit(match.path);
  if (!split)
    return {
      kind: "refused",
      status: 503,
      error: openAIError(
        `The Knative route for \`${match.host}\` sends no traffic anywhere (every split has 0 percent).`,
        "service_unavailable_error",
        "no_traffic_target",
      ),
    };
  const model = modelOf(split.namespace, split.name);
  if (!model)
    return {
      kind: "refused",
      status: 503,
      error: openAIError(
        `The revision ${split.namespace}/${split.name} that the Knative route for \`${match.host}\` sends this request to has no Snooze Model. Snooze's ingress routes only revisions of Snooze's autoscaler class, each through the Model of its name; give the Service's revision template Snooze's autoscaler class, or route it with Knative's own networking layer.`,
        "service_unavailable_error",
        "revision_not_served",
      ),
    };
  // Lower case, so an appended header replaces the client's own of that name instead of doubling it.
  const appended = Object.fromEntries(
    Object.entries(split.appendHeaders).map(([name, value]) => [name.toLowerCase(), value]),
  );
  return { kind: "model", model, revision: `${split.namespace}/${split.name}`, headers: appended };
}

/** A request for a host no KIngress names, that names no model either. */
export function unknownHost(host: string | undefined, known: string[]): OpenAIErrorBody {
  const shown = known.slice(0, 20).join(", ");
  return openAIError(
    `No Knative route serves the host \`${host ?? ""}\` and the request names no model. Known hosts: ${shown}${known.length > 20 ? ", …" : ""}.`,
    "invalid_request_error",
    "host_not_found",
  );
}
