import type { Clock } from "../../../lib/clock.ts";
import { KubeError } from "../../../lib/kube/client.ts";
import type { Lease } from "../../../lib/kube/lease.ts";
import { KubeClaimStore, type LeaseRequests } from "../../../webhooks/slot-claims.ts";

/**
 * The Lease part of the API in memory, as KubeClaimStore calls it: GET (one, or a namespace's list;
 * the label selector is not applied), POST (409 AlreadyExists
 * when the name is taken), PUT (409 Conflict on a stale resourceVersion) and DELETE (409 Conflict
 * when its precondition's resourceVersion is stale), each object with a resourceVersion of its own.
 * `beforeWrite` runs before a POST, PUT or DELETE is judged, so a test can hold writers until all
 * have read.
 */
export class FakeLeases implements LeaseRequests {
  readonly leases = new Map<string, Lease>();
  readonly writes: { method: string; path: string; body: Lease }[] = [];
  beforeWrite: () => Promise<void> = async () => {};
  /** Makes every call fail or hang. */
  fail: Error | "hang" | undefined;
  #version = 0;

  async request<T>(method: string, path: string, options: { body?: unknown; signal?: AbortSignal } = {}) {
    if (this.fail === "hang") return new Promise<T>(() => {});
    if (this.fail) throw this.fail;
    options.signal?.throwIfAborted();
    if (method === "GET" && path.endsWith("/leases")) {
      const items = [...this.leases.entries()]
        .filter(([key]) => key.startsWith(`${path}/`))
        .map(([, lease]) => structuredClone(lease));
      return { items } as T;
    }
    if (method === "GET") {
      const lease = this.leases.get(path);
      if (!lease) throw new KubeError(404, "NotFound", `leases "${path}" not found`);
      return structuredClone(lease) as T;
    }
    const body = structuredClone(options.body) as Lease;
    await this.beforeWrite();
    options.signal?.throwIfAborted();
    this.writes.push({ method, path, body });
    if (method === "DELETE") {
      const stored = this.leases.get(path);
      if (!stored) throw new KubeError(404, "NotFound", `leases "${path}" not found`);
      const wanted = (options.body as { preconditions?: { resourceVersion?: string } } | undefined)
        ?.preconditions?.resourceVersion;
      if (wanted !== undefined && wanted !== stored.metadata.resourceVersion)
        throw new KubeError(409, "Conflict", "the precondition on resourceVersion failed");
      this.leases.delete(path);
      return { kind: "Status", status: "Success" } as T;
    }
    const key = method === "POST" ? `${path}/${body.metadata.name}` : path;
    const stored = this.leases.get(key);
    if (method === "POST" && stored) throw new KubeError(409, "AlreadyExists", "already exists");
    if (method === "PUT") {
      if (!stored) throw new KubeError(404, "NotFound", "not found");
      if (stored.metadata.resourceVersion !== body.metadata.resourceVersion)
        throw new KubeError(409, "Conflict", "the object has been modified");
    }
    const written = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.#version) } };
    this.leases.set(key, written);
    return structuredClone(written) as T;
  }
}

/**
 * A clock at `now` whose timers never run: a claim store on it never ends the claims it writes, as
 * one whose process is gone (readers end them).
 */
export const gone = (now: () => number): Clock => ({ now, setTimeout: () => ({ cancel() {} }) });

/**
 * A claim store on fake Leases in snooze-system, its clock what sightings are judged by and what
 * ends its writes (by default one at 0 whose timers never run).
 */
export const fakeClaims = (leases = new FakeLeases(), clock: Clock = gone(() => 0)) =>
  new KubeClaimStore(leases, "snooze-system", { clock });
