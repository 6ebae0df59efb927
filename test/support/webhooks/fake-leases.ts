import { KubeError } from "../../../lib/kube/client.ts";
import type { Lease } from "../../../lib/kube/lease.ts";
import { KubeClaimStore, type LeaseRequests, type Schedule } from "../../../webhooks/slot-claims.ts";

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
 * Claim writes' ends, run by hand: `run()` ends every claim written so far, as its writer does when
 * its window has passed.
 */
export class ManualSchedule {
  readonly pending = new Set<() => void>();
  readonly schedule: Schedule = (run) => {
    this.pending.add(run);
    return () => this.pending.delete(run);
  };
  run(): void {
    const due = [...this.pending];
    this.pending.clear();
    for (const run of due) run();
  }
}

/**
 * A claim store on fake Leases in snooze-system. Its writes' ends never come unless `schedule` is
 * a ManualSchedule's that the test runs; `now` is the clock sightings are judged by.
 */
export const fakeClaims = (
  leases = new FakeLeases(),
  options: { now?: () => number; schedule?: Schedule } = {},
) => new KubeClaimStore(leases, "snooze-system", { schedule: new ManualSchedule().schedule, ...options });
