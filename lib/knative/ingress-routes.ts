import type { IncomingHttpHeaders } from "node:http";
import { type HTTPIngressPath, ingressVersion, type KIngress } from "./ingress-class.ts";

/**
 * **Pure**: the routing table of Snooze's KIngresses, and the decisions on it: which rule and path
 * a request's Host, path and headers select, and which split of that path takes it. The activator
 * routes with it; the ingress reconciler uses the same compilation to find hosts two KIngresses
 * claim. One table is compiled from all KIngresses at once and replaced whole, so a request sees
 * either the old splits or the new ones, never a mix.
 */

/** One backend of a path: a revision (Knative names the revision's Service after it). */
export interface RouteSplit {
  namespace: string;
  name: string;
  /** 0..100; the path's weights add up to 100 (Knative validates that). */
  percent: number;
  /** The path's appendHeaders, then the split's (the split's win). */
  appendHeaders: Record<string, string>;
}

export interface RoutePath {
  /** Literal prefix of the request path; "" is every path. */
  prefix: string;
  /** Header name (lower case) → the exact value it must have. */
  headers: [string, string][];
  splits: RouteSplit[];
  /** The smooth weighted round robin's running weights, one per split (mutated by chooseSplit). */
  current: number[];
}

export interface HostRoute {
  /** `namespace/name` of the KIngress. */
  ingress: string;
  /** `uid/generation` of the KIngress, answered to readiness probes. */
  version: string;
  paths: RoutePath[];
}

export interface HostTable {
  hosts: ReadonlyMap<string, HostRoute>;
  /** Hosts claimed by more than one KIngress: the oldest keeps it. */
  conflicts: { host: string; kept: string; refused: string }[];
}

export const emptyHostTable: HostTable = { hosts: new Map(), conflicts: [] };

/** A Host header's host: lower case, without port or trailing dot. */
export function normalizeHost(host: string | undefined): string {
  let h = (host ?? "").trim().toLowerCase();
  if (h.startsWith("[")) h = h.slice(0, h.indexOf("]") + 1);
  else if (h.includes(":")) h = h.slice(0, h.indexOf(":"));
  return h.endsWith(".") ? h.slice(0, -1) : h;
}

function compilePath(path: HTTPIngressPath): RoutePath {
  const splits = path.splits ?? [];
  return {
    prefix: path.path ?? "",
    headers: Object.entries(path.headers ?? {}).map(([name, match]) => [name.toLowerCase(), match.exact]),
    splits: splits.map((split) => ({
      namespace: split.serviceNamespace,
      name: split.serviceName,
      // A single split may leave percent out: it takes everything.
      percent: split.percent ?? (splits.length === 1 ? 100 : 0),
      appendHeaders: { ...(path.appendHeaders ?? {}), ...(split.appendHeaders ?? {}) },
    })),
    current: splits.map(() => 0),
  };
}

const age = (ingress: KIngress) => `${ingress.metadata.creationTimestamp ?? ""}|${keyOf(ingress)}`;
const keyOf = (ingress: KIngress) => `${ingress.metadata.namespace ?? ""}/${ingress.metadata.name}`;

/**
 * The table of these KIngresses (already filtered to Snooze's class). Rules without hosts are
 * skipped: Knative's Route always names its hosts. A host in two rules of one KIngress keeps the
 * first, as Knative's types say; a host in two KIngresses goes to the oldest.
 */
export function compileHostTable(ingresses: readonly KIngress[]): HostTable {
  const hosts = new Map<string, HostRoute>();
  const conflicts: HostTable["conflicts"] = [];
  for (const ingress of [...ingresses].sort((a, b) => (age(a) < age(b) ? -1 : 1))) {
    if (ingress.metadata.deletionTimestamp) continue;
    const key = keyOf(ingress);
    const version = ingressVersion(ingress);
    for (const rule of ingress.spec?.rules ?? []) {
      const paths = (rule.http?.paths ?? []).map(compilePath);
      for (const raw of rule.hosts ?? []) {
        const host = normalizeHost(raw);
        const owner = hosts.get(host);
        if (owner) {
          if (owner.ingress !== key) conflicts.push({ host, kept: owner.ingress, refused: key });
          continue;
        }
        hosts.set(host, { ingress: key, version, paths });
      }
    }
  }
  return { hosts, conflicts };
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

export type HostMatch =
  /** No KIngress names this host: the request is routed as without Knative. */
  | { kind: "none" }
  /** The host is known, but none of its paths takes this path and these headers. */
  | { kind: "no-path"; host: string; route: HostRoute }
  | { kind: "path"; host: string; route: HostRoute; path: RoutePath };

/** The first path of the host's rule whose prefix and every header match (Knative's order). */
export function matchHost(
  table: HostTable,
  host: string | undefined,
  path: string,
  headers: IncomingHttpHeaders,
): HostMatch {
  const name = normalizeHost(host);
  const route = table.hosts.get(name);
  if (!route) return { kind: "none" };
  const bare = path.split("?")[0] ?? "";
  for (const candidate of route.paths) {
    if (!bare.startsWith(candidate.prefix)) continue;
    if (candidate.headers.every(([header, exact]) => headerValue(headers, header) === exact))
      return { kind: "path", host: name, route, path: candidate };
  }
  return { kind: "no-path", host: name, route };
}

/**
 * Smooth weighted round robin (nginx's): every turn each split gains its weight, the one with the
 * most is chosen and pays back the total. Deterministic, and fair over any window: with weights
 * 50/50 the choices alternate, with 10/90 one in ten goes to the first, spread out, never in runs.
 * Undefined when no split has weight.
 */
export function pickSplit(
  weights: readonly number[],
  current: readonly number[],
): { index: number; current: number[] } | undefined {
  const total = weights.reduce((sum, w) => sum + Math.max(0, w), 0);
  if (total <= 0) return undefined;
  const next = weights.map((w, i) => (current[i] ?? 0) + Math.max(0, w));
  let index = 0;
  for (let i = 1; i < next.length; i++) if (next[i]! > next[index]!) index = i;
  next[index] = next[index]! - total;
  return { index, current: next };
}

/** Chooses the split of `path` for one request, advancing its round robin. */
export function chooseSplit(path: RoutePath): RouteSplit | undefined {
  const picked = pickSplit(
    path.splits.map((s) => s.percent),
    path.current,
  );
  if (!picked) return undefined;
  path.current = picked.current;
  return path.splits[picked.index];
}
