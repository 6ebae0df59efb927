import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, test, vi } from "vitest";
import { type KubeClient, KubeError } from "./client.ts";
import { type Lease, LeaseElector, leaseName, microTime } from "./lease.ts";

/** An in-memory Lease API with the apiserver's optimistic concurrency: stale writes get 409. */
class FakeLeases {
  leases = new Map<string, Lease>();
  version = 1;
  writes = 0;
  /** The API server cannot be reached: every call fails. */
  failing = false;
  private key(path: string) {
    return path.split("/").pop()!;
  }
  client(): KubeClient {
    const up = () => {
      if (this.failing) throw new KubeError(503, "ServiceUnavailable", "the API server is unreachable");
    };
    return {
      get: async (path: string) => {
        up();
        const lease = this.leases.get(this.key(path));
        if (!lease) throw new KubeError(404, "NotFound", "not found");
        return structuredClone(lease);
      },
      create: async (_path: string, body: Lease) => {
        if (this.leases.has(body.metadata.name)) throw new KubeError(409, "AlreadyExists", "exists");
        return this.store(body);
      },
      delete: async (path: string, options?: { preconditions?: { resourceVersion?: string } }) => {
        const current = this.leases.get(this.key(path));
        if (!current) throw new KubeError(404, "NotFound", "not found");
        const expected = options?.preconditions?.resourceVersion;
        if (expected !== undefined && current.metadata.resourceVersion !== expected)
          throw new KubeError(409, "Conflict", "precondition failed");
        this.leases.delete(this.key(path));
        return {};
      },
      replace: async (path: string, body: Lease) => {
        up();
        const current = this.leases.get(this.key(path));
        if (!current || current.metadata.resourceVersion !== body.metadata.resourceVersion)
          throw new KubeError(409, "Conflict", "the object has been modified");
        return this.store(body);
      },
    } as unknown as KubeClient;
  }
  private store(body: Lease): Lease {
    this.writes++;
    const stored = structuredClone(body);
    stored.metadata.resourceVersion = String(++this.version);
    this.leases.set(stored.metadata.name, stored);
    return structuredClone(stored);
  }
}

const timing = { durationMs: 400, renewDeadlineMs: 250, retryMs: 40 };
let electors: LeaseElector[] = [];
afterEach(async () => {
  await Promise.all(electors.map((e) => e.stop(false)));
  electors = [];
});

function elector(api: FakeLeases, identity: string, events: string[] = []) {
  const e = new LeaseElector({
    client: api.client(),
    namespace: "snooze-system",
    name: "snooze-slot-gpu-0",
    identity,
    address: `http://${identity}:8090`,
    timing,
    onStartedLeading: () => events.push(`${identity} leads`),
    onStoppedLeading: () => events.push(`${identity} stops`),
  });
  electors.push(e);
  return e;
}

async function until(check: () => boolean, what: string, ms = 3_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe("LeaseElector", () => {
  test("of two candidates exactly one leads, the other knows who and where", async () => {
    const api = new FakeLeases();
    const a = elector(api, "a");
    const b = elector(api, "b");
    a.start();
    b.start();
    await until(() => a.leading || b.leading, "a leader");
    for (let i = 0; i < 20; i++) {
      // Never two (zero is allowed for a moment: a stalled machine may miss a renewal deadline).
      expect(Number(a.leading) + Number(b.leading)).toBeLessThanOrEqual(1);
      await sleep(20);
    }
    await until(() => a.leading || b.leading, "a leader again");
    const [leader, follower] = a.leading ? [a, b] : [b, a];
    expect(follower.holder?.address).toBe(leader === a ? "http://a:8090" : "http://b:8090");
    expect(api.leases.get("snooze-slot-gpu-0")?.spec?.holderIdentity).toBe(leader === a ? "a" : "b");
  });

  test("a holder that dies (no release) is replaced after the lease duration, not before", async () => {
    const api = new FakeLeases();
    const events: string[] = [];
    const a = elector(api, "a", events);
    a.start();
    await until(() => a.leading, "a leading");
    await a.stop(false);
    const died = Date.now();
    const b = elector(api, "b", events);
    b.start();
    await until(() => b.leading, "b leading");
    expect(Date.now() - died).toBeGreaterThanOrEqual(timing.durationMs * 0.9);
    expect(api.leases.get("snooze-slot-gpu-0")?.spec).toMatchObject({
      holderIdentity: "b",
      leaseTransitions: 1,
    });
    expect(events).toEqual(["a leads", "a stops", "b leads"]);
  });

  test("a holder that stops releases the lease: the successor takes it at its next try", async () => {
    const api = new FakeLeases();
    const a = elector(api, "a");
    const b = elector(api, "b");
    a.start();
    await until(() => a.leading, "a leading");
    b.start();
    await sleep(100);
    expect(b.leading).toBe(false);
    const released = Date.now();
    await a.stop(true);
    await until(() => b.leading, "b leading");
    expect(Date.now() - released).toBeLessThan(timing.durationMs);
  });

  test("a holder that retires (its Model is gone) deletes the lease; a candidate that does not hold it leaves it", async () => {
    // Released, a deleted Model's Lease stayed for good: one per Model ever made, so one per
    // Knative revision, piling up in snooze-system.
    const api = new FakeLeases();
    const events: string[] = [];
    const a = elector(api, "a", events);
    const b = elector(api, "b", events);
    a.start();
    await until(() => a.leading, "a leading");
    b.start();
    await sleep(100);
    await b.retire();
    expect(api.leases.has("snooze-slot-gpu-0")).toBe(true);
    await a.retire();
    expect(api.leases.has("snooze-slot-gpu-0")).toBe(false);
    expect(events).toEqual(["a leads", "a stops"]);
    // Stopped: it does not make the Lease again.
    await sleep(100);
    expect(api.leases.has("snooze-slot-gpu-0")).toBe(false);
  });

  test("a retiring holder whose lease was taken over meanwhile does not delete the new holder's", async () => {
    const api = new FakeLeases();
    const a = elector(api, "a");
    a.start();
    await until(() => a.leading, "a leading");
    const lease = api.leases.get("snooze-slot-gpu-0")!;
    lease.spec = { ...lease.spec, holderIdentity: "b", renewTime: new Date().toISOString() };
    lease.metadata.resourceVersion = "999";
    await a.retire();
    expect(api.leases.get("snooze-slot-gpu-0")?.spec?.holderIdentity).toBe("b");
  });

  test("a retiring holder leaves a lease another elector of the same identity renewed since (its Model made again at once)", async () => {
    const api = new FakeLeases();
    const old = elector(api, "a");
    old.start();
    await until(() => old.leading, "the old elector leading");
    const again = elector(api, "a");
    again.start();
    await until(() => again.leading, "the new elector leading");
    await old.retire();
    expect(api.leases.get("snooze-slot-gpu-0")?.spec?.holderIdentity).toBe("a");
    expect(again.leading).toBe(true);
  });

  test("a holder that cannot renew stops leading within the renew deadline", async () => {
    const api = new FakeLeases();
    const events: string[] = [];
    const a = elector(api, "a", events);
    a.start();
    await until(() => a.leading, "a leading");
    // Someone else took the Lease over behind its back (as after a long pause): a's writes now conflict.
    const lease = api.leases.get("snooze-slot-gpu-0")!;
    lease.spec = { ...lease.spec, holderIdentity: "intruder", renewTime: new Date().toISOString() };
    lease.metadata.resourceVersion = "999";
    await until(() => !a.leading, "a not leading", timing.renewDeadlineMs + 500);
    expect(events).toContain("a stops");
  });

  describe("a system clock that jumps (durations are measured on the monotonic clock)", () => {
    // Driven by hand: `tryNow` for each try, a monotonic clock the test moves, and the wall clock
    // (Date.now, what renewTime is written on) set apart from it.
    let mono = 0;
    let wall = Date.parse("2026-12-07T02:00:00Z");
    afterEach(() => vi.restoreAllMocks());
    function manual(api: FakeLeases, identity: string) {
      vi.spyOn(Date, "now").mockImplementation(() => wall);
      const e = new LeaseElector({
        client: api.client(),
        namespace: "snooze-system",
        name: "snooze-slot-gpu-0",
        identity,
        timing,
        monotonicNow: () => mono,
      });
      electors.push(e);
      return e;
    }
    const hour = 3_600_000;

    test("a holder whose clock went back an hour still stops leading once it could not renew for the renew deadline", async () => {
      // Before: leading was Date.now() minus the last renewal, negative after the jump, so a holder
      // cut off from the API server went on acting for an hour while another took the Lease after
      // its duration: two writers of one slot.
      const api = new FakeLeases();
      const a = manual(api, "a");
      await a.tryNow();
      expect(a.leading).toBe(true);
      api.failing = true;
      wall -= hour;
      mono += timing.renewDeadlineMs + 1;
      expect(a.leading).toBe(false);
      await a.tryNow();
      expect(a.leading).toBe(false);
    });

    test("a holder whose clock went forward an hour keeps leading while it renews", async () => {
      const api = new FakeLeases();
      const a = manual(api, "a");
      await a.tryNow();
      wall += hour;
      mono += timing.retryMs;
      expect(a.leading).toBe(true);
      await a.tryNow();
      expect(a.leading).toBe(true);
    });

    test("a candidate whose clock went forward an hour does not take a lease its holder renewed a moment ago", async () => {
      const api = new FakeLeases();
      const a = manual(api, "a");
      const b = manual(api, "b");
      await a.tryNow();
      await b.tryNow();
      wall += hour;
      mono += timing.retryMs;
      await b.tryNow();
      expect(b.leading).toBe(false);
      expect(api.leases.get("snooze-slot-gpu-0")?.spec?.holderIdentity).toBe("a");
    });

    test("a candidate whose clock went back an hour takes a dead holder's lease after its duration, not an hour later", async () => {
      const api = new FakeLeases();
      const a = manual(api, "a");
      const b = manual(api, "b");
      await a.tryNow();
      await b.tryNow();
      wall -= hour;
      // The Lease says its duration in whole seconds.
      mono += Math.ceil(timing.durationMs / 1000) * 1000 + 1;
      await b.tryNow();
      expect(b.leading).toBe(true);
      // What it writes is still the wall clock, which other processes read.
      expect(api.leases.get("snooze-slot-gpu-0")?.spec?.renewTime).toBe(microTime(wall));
    });
  });

  test("lease names are valid DNS subdomains", () => {
    expect(leaseName("snooze-slot", "GPU_0")).toBe("snooze-slot-gpu-0");
    expect(leaseName("snooze-model", "team-a.qwen")).toBe("snooze-model-team-a.qwen");
  });

  test("a Model's name that fills the length limit still makes a valid Lease name of its own", () => {
    // Before, the name was cut at 253: here it ended in "-" (the API server refused the Lease, so
    // the Model never had a leader), and two names alike in their first 232 characters shared it.
    const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
    const names = [
      `${"a".repeat(231)}-${"b".repeat(21)}`,
      `${"a".repeat(231)}-${"c".repeat(21)}`,
      `${"a".repeat(231)}.${"b".repeat(21)}`,
      "q".repeat(253),
    ];
    const leases = names.map((name) => leaseName("snooze-model", `default.${name}`));
    for (const lease of leases) {
      expect(lease.length).toBeLessThanOrEqual(253);
      expect(lease).toMatch(dnsSubdomain);
      expect(
        lease.startsWith("snooze-model-default.aaaa") || lease.startsWith("snooze-model-default.qqqq"),
      ).toBe(true);
    }
    expect(new Set(leases).size).toBe(names.length);
    // Names that fit are kept as they are (the Leases of existing Models do not change).
    const fits = `default.${"a".repeat(232)}`;
    expect(leaseName("snooze-model", fits)).toBe(`snooze-model-${fits}`);
  });
});

describe("an API server that stops answering (a hung connection, not a refusal)", () => {
  test("the holder stands down by its renew deadline, not after the client's 30 s timeout", async () => {
    // Before: every Lease call used the client's 30 s timeout, so a holder whose renew hung stayed
    // leading (its controllers never told to stand down) long after its Lease had expired for the
    // other replicas, which took it over: two leaders at once.
    const { createServer } = await import("node:http");
    const { KubeClient } = await import("./client.ts");
    let stored: Lease | undefined;
    let version = 1;
    let hang = false;
    const hung = new Set<import("node:http").ServerResponse>();
    const server = createServer((req, res) => {
      if (hang) {
        hung.add(res);
        return;
      }
      let body = "";
      req.on("data", (chunk) => {
        body += chunk;
      });
      req.on("end", () => {
        const send = (status: number, object: unknown) => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(JSON.stringify(object));
        };
        if (req.method === "GET") {
          if (!stored)
            return send(404, { kind: "Status", reason: "NotFound", message: "not found", code: 404 });
          return send(200, stored);
        }
        stored = JSON.parse(body) as Lease;
        stored.metadata.resourceVersion = String(++version);
        send(req.method === "POST" ? 201 : 200, stored);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    const client = new KubeClient({ server: `http://127.0.0.1:${port}` });
    let stoodDownAt: number | undefined;
    const elector = new LeaseElector({
      client,
      namespace: "snooze-system",
      name: "snooze-slot-gpu",
      identity: "autoscaler-0",
      timing: { durationMs: 1_600, renewDeadlineMs: 1_000, retryMs: 100 },
      onStoppedLeading: () => {
        stoodDownAt = performance.now();
      },
    });
    try {
      elector.start();
      await vi.waitFor(() => expect(elector.leading).toBe(true), { timeout: 5_000 });
      hang = true;
      const hungAt = performance.now();
      await vi.waitFor(() => expect(stoodDownAt).toBeDefined(), { timeout: 10_000, interval: 50 });
      // Within its renew deadline of the last renew (≤ 1 s after the hang began, plus a turn).
      expect(stoodDownAt! - hungAt).toBeLessThan(1_000 + 500);
    } finally {
      await elector.stop(false);
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await client.close(0);
    }
  }, 20_000);
});
