import { readFileSync } from "node:fs";
import { beforeEach, describe, expect, test } from "vitest";
import { ManualClock } from "../test/support/manual-clock.ts";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { FakeLeases, fakeClaims, gone } from "../test/support/webhooks/fake-leases.ts";
import { resources } from "../test/support/webhooks/review-fixtures.ts";
import type { AdmissionRequest } from "./admission.ts";
import { handle } from "./handlers.ts";
import {
  admitWithClaim,
  type Claim,
  checkClaim,
  claimedSlotMessage,
  claimLeaseName,
  claimOfLease,
  claimWindowMs,
  type KubeClaimStore,
  leaseOfClaim,
  type StoredClaim,
} from "./slot-claims.ts";
import type { ResidencyIntent } from "./slot-residency.ts";
import { allow, forbid, type Verdict } from "./verdict.ts";

const qwen = { kind: "Deployment", name: "qwen" };
const llama = { kind: "Deployment", name: "llama" };
const claimOf = (member: typeof qwen, at: number): Claim => ({ member, at, windowMs: 15_000 });
const t0 = Date.parse("2026-01-01T00:00:00Z");

const stored = (claim: Claim | undefined, seenForMs = 0): StoredClaim | undefined =>
  claim ? { resourceVersion: "1", claim, seenForMs } : undefined;

describe("checkClaim: does a claim keep a member out", () => {
  test.each([
    { name: "no claim", claim: undefined, seen: 0, now: t0, held: false },
    { name: "its own claim", claim: claimOf(qwen, t0), seen: 1, now: t0 + 1, held: false },
    {
      name: "a claim under its other name (the Model of the Deployment)",
      claim: claimOf({ kind: "Model", name: "qwen-model" }, t0),
      seen: 1,
      now: t0 + 1,
      held: false,
    },
    {
      name: "another member's, seen here for 2 s",
      claim: claimOf(llama, t0),
      seen: 2_000,
      now: t0 + 2_000,
      held: true,
    },
    {
      name: "another member's, seen here for just under the window",
      claim: claimOf(llama, t0),
      seen: 14_999,
      now: t0 + 14_999,
      held: true,
    },
    {
      name: "another member's, seen here for the window",
      claim: claimOf(llama, t0),
      seen: 15_000,
      now: t0 + 15_000,
      held: false,
    },
    {
      name: "another member's, just written, read on a clock 20 s ahead of its writer's",
      claim: claimOf(llama, t0),
      seen: 0,
      now: t0 + 20_000,
      held: true,
    },
    {
      name: "another member's, written on a clock an hour ahead, first seen here",
      claim: claimOf(llama, t0 + 3_600_000),
      seen: 0,
      now: t0,
      held: true,
    },
    {
      name: "another member's, written on a clock an hour ahead, seen here for the window",
      claim: claimOf(llama, t0 + 3_600_000),
      seen: 15_000,
      now: t0 + 15_000,
      held: false,
    },
    {
      name: "another member's, its writer gone an hour ago (never ended), first seen here",
      claim: claimOf(llama, t0 - 3_600_000),
      seen: 0,
      now: t0,
      held: true,
    },
  ])("$name: held $held", ({ claim, seen, now, held }) => {
    const self = [qwen, { kind: "Model", name: "qwen-model" }];
    expect(checkClaim(stored(claim, seen), self, now).held).toBe(held);
  });

  test("says how old the claim is and how long is left: by its writer's clock when that agrees", () => {
    expect(checkClaim(stored(claimOf(llama, t0), 2_000), [qwen], t0 + 2_000)).toEqual({
      held: true,
      claim: claimOf(llama, t0),
      ageMs: 2_000,
      retryInMs: 13_000,
    });
    // First read here 5 s after it was written (on agreeing clocks): its writer ends it in 10 s.
    expect(checkClaim(stored(claimOf(llama, t0), 0), [qwen], t0 + 5_000)).toMatchObject({
      ageMs: 5_000,
      retryInMs: 10_000,
    });
    // Clocks that cannot be right (ahead; or the window passed, so the writer did not end it): the
    // window from the first read here.
    expect(checkClaim(stored(claimOf(llama, t0 + 3_000), 0), [qwen], t0)).toMatchObject({
      ageMs: 0,
      retryInMs: 15_000,
    });
    expect(checkClaim(stored(claimOf(llama, t0), 1_000), [qwen], t0 + 20_000)).toMatchObject({
      ageMs: 1_000,
      retryInMs: 14_000,
    });
  });
});

describe("the claim Lease", () => {
  test("named after namespace and slot when that is a valid name, else by a hash", () => {
    expect(claimLeaseName("team-a", "gpu-0")).toBe("snooze-claim-team-a.gpu-0");
    const odd = claimLeaseName("team-a", "GPU_0");
    expect(odd).toMatch(/^snooze-claim-[0-9a-f]{20}$/);
    expect(claimLeaseName("team-a", "GPU_1")).not.toBe(odd);
    expect(claimLeaseName("team-a", "x".repeat(250))).toMatch(/^snooze-claim-[0-9a-f]{20}$/);
    // The first dot splits namespace and slot: no two pairs share a readable name.
    expect(claimLeaseName("a", "b.c")).not.toBe(claimLeaseName("a-b", "c"));
  });

  test("holds the member, when and for how long; round trip", () => {
    const lease = leaseOfClaim("snooze-system", "team-a", "gpu-0", claimOf(qwen, t0), "7");
    expect(lease.metadata).toMatchObject({
      name: "snooze-claim-team-a.gpu-0",
      namespace: "snooze-system",
      resourceVersion: "7",
      annotations: { "snooze.dev/claim-namespace": "team-a", "snooze.dev/claim-slot": "gpu-0" },
    });
    expect(lease.spec).toEqual({
      holderIdentity: "Deployment/qwen",
      leaseDurationSeconds: 15,
      acquireTime: "2026-01-01T00:00:00.000000Z",
      renewTime: "2026-01-01T00:00:00.000000Z",
    });
    expect(claimOfLease(lease)).toEqual(claimOf(qwen, t0));
  });

  test.each([
    { holderIdentity: "", renewTime: "2026-01-01T00:00:00Z", leaseDurationSeconds: 15 },
    { holderIdentity: "qwen", renewTime: "2026-01-01T00:00:00Z", leaseDurationSeconds: 15 },
    { holderIdentity: "Deployment/", renewTime: "2026-01-01T00:00:00Z", leaseDurationSeconds: 15 },
    { holderIdentity: "Deployment/qwen", leaseDurationSeconds: 15 },
    { holderIdentity: "Deployment/qwen", renewTime: "2026-01-01T00:00:00Z" },
  ])("a Lease that holds no readable claim is free: %o", (spec) => {
    expect(claimOfLease({ metadata: { name: "x" }, spec })).toBeUndefined();
  });
});

test("docs/webhooks.md quotes the claim refusal word for word", () => {
  const docs = readFileSync(new URL("../docs/webhooks.md", import.meta.url), "utf8");
  expect(docs).toContain(
    claimedSlotMessage({
      slot: "gpu-0",
      member: { kind: "Deployment", name: "qwen" },
      change: "spec.replicas (scale) from 0 to 1",
      modelId: "qwen",
      claimant: { kind: "Deployment", name: "llama" },
      ageMs: 1_200,
      retryInMs: 13_800,
    }),
  );
});

describe("admitWithClaim: one claim per slot, by compare-and-swap", () => {
  let leases: FakeLeases;
  let store: KubeClaimStore;
  let clock: number;
  const intentOf = (member: typeof qwen): ResidencyIntent => ({
    slot: "gpu-0",
    member,
    change: "spec.replicas (scale) from 0 to 1",
    modelId: member.name,
  });
  const admit = (member: typeof qwen, extra: Partial<Parameters<typeof admitWithClaim>[0]> = {}) =>
    admitWithClaim({
      store,
      namespace: "team-a",
      intent: intentOf(member),
      dryRun: false,
      override: false,
      decide: async () => allow(),
      now: () => clock,
      ...extra,
    });
  const stored = () =>
    leases.leases.get(
      `/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-claim-team-a.gpu-0`,
    );

  /** Holds every write until `n` writers are waiting, so all of them have read the same claim. */
  const barrier = (n: number) => {
    let waiting = 0;
    const all = Promise.withResolvers<void>();
    leases.beforeWrite = async () => {
      if (++waiting >= n) all.resolve();
      await all.promise;
    };
  };

  beforeEach(() => {
    leases = new FakeLeases();
    clock = t0;
    store = fakeClaims(
      leases,
      gone(() => clock),
    );
  });

  test("an empty slot: the write takes the claim and is allowed", async () => {
    expect(await admit(qwen)).toEqual(allow());
    expect(stored()?.spec?.holderIdentity).toBe("Deployment/qwen");
    expect(leases.writes.map((w) => w.method)).toEqual(["POST"]);
  });

  test("two writes that both read an empty slot: exactly one is allowed (AlreadyExists)", async () => {
    barrier(2);
    const [a, b] = await Promise.all([admit(qwen), admit(llama)]);
    expect([a.allowed, b.allowed].filter(Boolean)).toHaveLength(1);
    const refused = a.allowed ? b : a;
    const winner = a.allowed ? "qwen" : "llama";
    expect(refused.code).toBe(403);
    expect(refused.message).toMatch(
      new RegExp(`^slot "gpu-0" is claimed: Deployment "${winner}" was admitted as its resident 0\\.0s ago`),
    );
    expect(refused.message).toContain("Retry in 15.0s");
    expect(stored()?.spec?.holderIdentity).toBe(`Deployment/${winner}`);
  });

  test("two writes that both read an expired claim: exactly one is allowed (Conflict)", async () => {
    await admit({ kind: "Model", name: "old" });
    clock += claimWindowMs;
    barrier(2);
    const verdicts = await Promise.all([admit(qwen), admit(llama)]);
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(1);
    expect(leases.writes.slice(1).map((w) => w.method)).toEqual(["PUT", "PUT"]);
  });

  test("eight writers at once, two of them the same member: only that member is allowed", async () => {
    barrier(8);
    const members = [qwen, qwen, ...["a", "b", "c", "d", "e", "f"].map((name) => ({ kind: "Model", name }))];
    const verdicts = await Promise.all(members.map((m) => admit(m)));
    const allowed = members.filter((_, i) => verdicts[i]!.allowed);
    expect(new Set(allowed.map((m) => m.name)).size).toBe(1);
  });

  test("the same write again (a retry) renews its own claim", async () => {
    await admit(qwen);
    clock += 5_000;
    expect((await admit(qwen)).allowed).toBe(true);
    expect(claimOfLease(stored()!)?.at).toBe(t0 + 5_000);
  });

  test("another member waits out the window; then the cluster decides", async () => {
    await admit(qwen);
    clock += 10_000;
    const early = await admit(llama);
    expect(early.message).toContain('Deployment "qwen" was admitted as its resident 10.0s ago');
    expect(early.message).toContain("Retry in 5.0s");
    clock += 5_000;
    let decided = 0;
    const decide = async () => {
      decided++;
      return forbid("the cluster says no");
    };
    expect(await admit(llama, { decide })).toEqual(forbid("the cluster says no"));
    expect(decided).toBe(1);
    // A refused write takes no claim.
    expect(stored()?.spec?.holderIdentity).toBe("Deployment/qwen");
  });

  test("the cluster is read after the claim, and only when the claim lets the write through", async () => {
    const order: string[] = [];
    const reading = store.read.bind(store);
    store.read = async (...args) => {
      order.push("claim");
      return reading(...args);
    };
    await admit(qwen, {
      decide: async () => {
        order.push("cluster");
        return allow();
      },
    });
    expect(order).toEqual(["claim", "cluster"]);
    let decided = false;
    await admit(llama, {
      decide: async () => {
        decided = true;
        return allow();
      },
    });
    expect(decided).toBe(false);
  });

  test("a dry run honours a claim and writes none", async () => {
    expect((await admit(qwen, { dryRun: true })).allowed).toBe(true);
    expect(leases.writes).toEqual([]);
    await admit(llama);
    expect((await admit(qwen, { dryRun: true })).allowed).toBe(false);
    expect(leases.writes).toHaveLength(1);
  });

  test("the autoscaler's own write takes a claim another member holds", async () => {
    await admit(llama);
    expect((await admit(qwen, { override: true })).allowed).toBe(true);
    expect(stored()?.spec?.holderIdentity).toBe("Deployment/qwen");
  });

  test("a claim that keeps changing under it: refused with an error after 3 tries, never allowed", async () => {
    // Something rewrites the claim between every read and write of this review.
    let writes = 0;
    leases.beforeWrite = async () => {
      const key = "/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-claim-team-a.gpu-0";
      const current = leases.leases.get(key);
      if (current)
        leases.leases.set(key, {
          ...current,
          metadata: { ...current.metadata, resourceVersion: `x${++writes}` },
        });
    };
    await fakeClaims(leases).write("team-a", "gpu-0", claimOf(qwen, t0 - 60_000), undefined);
    await expect(admit(qwen)).rejects.toThrow('the admission claim on slot "gpu-0" changed under 3 attempts');
  });

  test("past the decision's deadline no claim is written", async () => {
    const deadline = new AbortController();
    const verdict = admit(qwen, {
      signal: deadline.signal,
      decide: async () => {
        deadline.abort(new Error("deadline"));
        return allow();
      },
    });
    await expect(verdict).rejects.toThrow("deadline");
    expect(leases.writes).toEqual([]);
  });

  test("a claim that cannot be read or written refuses (fail closed)", async () => {
    leases.fail = new Error("apiserver unreachable");
    await expect(admit(qwen)).rejects.toThrow("apiserver unreachable");
  });
});

describe("clocks: two replicas that disagree", () => {
  const intentOf = (member: typeof qwen): ResidencyIntent => ({
    slot: "gpu-0",
    member,
    change: "spec.replicas (scale) from 0 to 1",
    modelId: member.name,
  });
  let leases: FakeLeases;
  /** Time as it passes on both replicas (their monotonic clocks run alike), and a's timers. */
  let clock: ManualClock;
  /** Replica a, the writer, its wall clock right; replica b reads with its wall clock `skew` off. */
  let a: KubeClaimStore;
  let b: KubeClaimStore;
  const admitOn = (store: KubeClaimStore, member: typeof qwen, skew = 0) =>
    admitWithClaim({
      store,
      namespace: "team-a",
      intent: intentOf(member),
      dryRun: false,
      override: false,
      decide: async () => allow(),
      now: () => t0 + clock.now() + skew,
    });
  const key = "/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-claim-team-a.gpu-0";
  /** The deletes the ends started have been answered. */
  const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

  beforeEach(() => {
    leases = new FakeLeases();
    clock = new ManualClock(0);
    a = fakeClaims(leases, clock);
    b = fakeClaims(
      leases,
      gone(() => 1_000_000 + clock.now()),
    );
  });

  test.each([
    ["20 s ahead (the claim looked 20 s old: expired)", 20_000],
    ["an hour behind (the claim looked an hour ahead: a broken clock, ignored)", -3_600_000],
    ["an hour ahead", 3_600_000],
  ])("a reader whose clock is %s refuses a claim just written, for its window", async (_, skew) => {
    // The writer is gone before it could end its claim: its timers never run.
    const writer = fakeClaims(
      leases,
      gone(() => clock.now()),
    );
    expect((await admitOn(writer, qwen)).allowed).toBe(true);
    const refused = await admitOn(b, llama, skew);
    expect(refused.message).toMatch(
      /^slot "gpu-0" is claimed: Deployment "qwen" was admitted as its resident 0\.0s ago/,
    );
    expect(refused.message).toContain("Retry in 15.0s");
    clock.advance(14_999);
    expect((await admitOn(b, llama, skew)).allowed).toBe(false);
    // A window after b first read it, b lets the next one in.
    clock.advance(1);
    expect((await admitOn(b, llama, skew)).allowed).toBe(true);
  });

  test("the writer ends its claim when the window has passed on its own clock: every replica admits then", async () => {
    expect((await admitOn(a, qwen)).allowed).toBe(true);
    clock.advance(10_000);
    // b reads it for the first time 10 s after it was written; on agreeing clocks it says 5 s are left.
    expect((await admitOn(b, llama)).message).toContain("Retry in 5.0s");
    clock.advance(5_000);
    await settled();
    expect(leases.leases.has(key)).toBe(false);
    expect((await admitOn(b, llama)).allowed).toBe(true);
  });

  test("a claim renewed (or taken) since is not ended by the earlier write's end", async () => {
    await admitOn(a, qwen);
    clock.advance(5_000);
    await admitOn(a, qwen);
    // The first write's end, 15 s after it: the claim was written again since.
    clock.advance(10_000);
    await settled();
    expect(leases.leases.get(key)?.spec?.holderIdentity).toBe("Deployment/qwen");
    clock.advance(5_000);
    await settled();
    expect(leases.leases.has(key)).toBe(false);
  });

  test("a store that closes stops ending its claims (they end a window after readers first saw them)", async () => {
    await admitOn(a, qwen);
    expect(clock.pending).toBe(1);
    a.close();
    expect(clock.pending).toBe(0);
  });
});

describe("claims left behind are collected", () => {
  const base = "/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases";
  let leases: FakeLeases;
  let elapsed: number;
  let collector: KubeClaimStore;
  /** A claim whose writer was gone before it could end it (its end never runs). */
  const orphan = (slot: string, member = qwen) =>
    fakeClaims(leases).write("team-a", slot, claimOf(member, t0), undefined);

  beforeEach(() => {
    leases = new FakeLeases();
    elapsed = 0;
    collector = fakeClaims(
      leases,
      gone(() => elapsed),
    );
  });

  test("a claim seen unchanged for its window is deleted; one first listed, or renewed since, stays", async () => {
    await orphan("gone-slot");
    await orphan("busy-slot");
    expect(await collector.collect()).toBe(0);
    elapsed += 10_000;
    await orphan("late-slot");
    // busy-slot's claim is taken anew (another version) before the window passes.
    const busy = await fakeClaims(leases).read("team-a", "busy-slot");
    await fakeClaims(leases).write("team-a", "busy-slot", claimOf(llama, t0 + 10_000), busy);
    expect(await collector.collect()).toBe(0);
    elapsed += 5_000;
    expect(await collector.collect()).toBe(1);
    expect([...leases.leases.keys()].sort()).toEqual([
      `${base}/snooze-claim-team-a.busy-slot`,
      `${base}/snooze-claim-team-a.late-slot`,
    ]);
    elapsed += 10_000;
    expect(await collector.collect()).toBe(2);
    expect(leases.leases.size).toBe(0);
  });

  test("a Lease that holds no readable claim is deleted at once; a claim rewritten while collecting stays", async () => {
    leases.leases.set(`${base}/snooze-claim-junk`, {
      metadata: { name: "snooze-claim-junk", resourceVersion: "j1" },
      spec: {},
    });
    await orphan("gpu-0");
    await collector.collect();
    expect(leases.leases.has(`${base}/snooze-claim-junk`)).toBe(false);
    elapsed += 15_000;
    leases.beforeWrite = async () => {
      const key = `${base}/snooze-claim-team-a.gpu-0`;
      const current = leases.leases.get(key)!;
      leases.leases.set(key, { ...current, metadata: { ...current.metadata, resourceVersion: "renewed" } });
    };
    expect(await collector.collect()).toBe(0);
    expect(leases.leases.has(`${base}/snooze-claim-team-a.gpu-0`)).toBe(true);
  });
});

describe("through the handlers: two reviews of one empty slot at once", () => {
  const request = (name: string): AdmissionRequest => ({
    uid: name,
    kind: { group: "autoscaling", version: "v1", kind: "Scale" },
    resource: resources.deployments,
    subResource: "scale",
    name,
    namespace: "team-a",
    operation: "UPDATE",
    userInfo: { username: "alice" },
    object: { spec: { replicas: 1 } },
    oldObject: { spec: { replicas: 0 } },
  });
  const autoscaler = {
    username: "system:serviceaccount:snooze-system:snooze-autoscaler",
    leaseNamespace: "snooze-system",
  };

  test("kubectl scale of two members at once (repro B): one allowed, one refused", async () => {
    const cluster = new FakeClusterReader();
    const member = (name: string) => ({
      kind: "Deployment" as const,
      object: { metadata: { name, namespace: "team-a", annotations: { "snooze.dev/slot": "race" } } },
    });
    cluster.workloads = [member("sa"), member("sb")];
    const leases = new FakeLeases();
    let waiting = 0;
    const both = Promise.withResolvers<void>();
    leases.beforeWrite = async () => {
      if (++waiting >= 2) both.resolve();
      await both.promise;
    };
    const deps = { cluster, autoscaler, claims: fakeClaims(leases) };
    const verdicts: Verdict[] = await Promise.all([
      handle("validate-scale", request("sa"), deps),
      handle("validate-scale", request("sb"), deps),
    ]);
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(1);
    expect(verdicts.find((v) => !v.allowed)?.message).toMatch(/^slot "race" is claimed: Deployment "s[ab]"/);
    // A dry run of the loser now is refused too, and writes nothing more.
    const writes = leases.writes.length;
    const loser = verdicts[0]!.allowed ? "sb" : "sa";
    expect((await handle("validate-scale", { ...request(loser), dryRun: true }, deps)).allowed).toBe(false);
    expect(leases.writes).toHaveLength(writes);
  });
});

describe("a member that stops asking for its slot gives its claim back", () => {
  const autoscaler = {
    username: "system:serviceaccount:snooze-system:snooze-autoscaler",
    leaseNamespace: "snooze-system",
  };
  const claimKey = "/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-claim-team-a.gpu-0";
  const annotated = { "snooze.dev/slot": "gpu-0" };
  const deployment = (name: string, replicas: number, annotations: Record<string, string> = annotated) => ({
    metadata: { name, namespace: "team-a", annotations },
    spec: { replicas },
  });
  const scaleReview = (name: string, from: number, to: number, extra: Partial<AdmissionRequest> = {}) =>
    ({
      uid: `${name}-${from}-${to}`,
      kind: { group: "autoscaling", version: "v1", kind: "Scale" },
      resource: resources.deployments,
      subResource: "scale",
      name,
      namespace: "team-a",
      operation: "UPDATE",
      userInfo: { username: "alice" },
      object: { spec: { replicas: to } },
      oldObject: { spec: { replicas: from } },
      ...extra,
    }) as AdmissionRequest;
  const workloadReview = (
    operation: "UPDATE" | "DELETE",
    old: Record<string, unknown>,
    now?: Record<string, unknown>,
  ): AdmissionRequest => ({
    uid: "w",
    kind: { group: "apps", version: "v1", kind: "Deployment" },
    resource: resources.deployments,
    name: "qwen",
    namespace: "team-a",
    operation,
    userInfo: { username: "alice" },
    oldObject: old,
    ...(now ? { object: now } : {}),
  });
  const model = (replicas: number, slot = "gpu-0") => ({
    metadata: { name: "qwen", namespace: "team-a" },
    spec: { slot, replicas, workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen-engine" } },
  });
  const modelReview = (old: Record<string, unknown>, now?: Record<string, unknown>): AdmissionRequest => ({
    uid: "m",
    kind: { group: "snooze.dev", version: "v1alpha1", kind: "Model" },
    resource: resources.models,
    name: "qwen",
    namespace: "team-a",
    operation: now ? "UPDATE" : "DELETE",
    userInfo: { username: "alice" },
    oldObject: old,
    ...(now ? { object: now } : {}),
  });

  let cluster: FakeClusterReader;
  let leases: FakeLeases;
  let deps: Parameters<typeof handle>[2];
  beforeEach(() => {
    cluster = new FakeClusterReader();
    cluster.workloads = ["qwen", "llama"].map((name) => ({
      kind: "Deployment" as const,
      object: deployment(name, 0),
    }));
    leases = new FakeLeases();
    deps = { cluster, autoscaler, claims: fakeClaims(leases) };
  });

  /** qwen is admitted (claim), then `leave` runs; then llama's scale from 0 to 1 is judged at once. */
  async function llamaAfter(leave: () => Promise<Verdict>): Promise<Verdict> {
    expect((await handle("validate-scale", scaleReview("qwen", 0, 1), deps)).allowed).toBe(true);
    expect(leases.leases.get(claimKey)?.spec?.holderIdentity).toBe("Deployment/qwen");
    expect((await leave()).allowed).toBe(true);
    return handle("validate-scale", scaleReview("llama", 0, 1), deps);
  }

  test("without it, the next member is refused for the claim's window (the protection itself)", async () => {
    const verdict = await llamaAfter(async () => allow());
    expect(verdict.message).toMatch(/^slot "gpu-0" is claimed: Deployment "qwen"/);
  });

  test.each([
    ["scaled to 0 (kubectl scale)", () => handle("validate-scale", scaleReview("qwen", 1, 0), deps)],
    [
      "scaled to 0 by an update",
      () =>
        handle(
          "validate-workloads",
          workloadReview("UPDATE", deployment("qwen", 1), deployment("qwen", 0)),
          deps,
        ),
    ],
    ["deleted", () => handle("validate-workloads", workloadReview("DELETE", deployment("qwen", 1)), deps)],
    [
      "taken out of the slot",
      () =>
        handle(
          "validate-workloads",
          workloadReview("UPDATE", deployment("qwen", 1), deployment("qwen", 1, {})),
          deps,
        ),
    ],
  ])("%s: the next member is admitted at once", async (_, leave) => {
    const verdict = await llamaAfter(leave);
    expect(verdict, verdict.message).toEqual(allow());
    expect(leases.leases.get(claimKey)?.spec?.holderIdentity).toBe("Deployment/llama");
  });

  test("a Model scaled to 0, through its scale or an update, or deleted gives back its claim", async () => {
    cluster.models = [model(0)];
    const up = { ...modelReview(model(0), model(1)), operation: "UPDATE" as const };
    const leaves: (() => Promise<Verdict>)[] = [
      () => handle("validate-models", modelReview(model(1), model(0)), deps),
      () =>
        handle(
          "validate-scale",
          { ...scaleReview("qwen", 1, 0), resource: resources.models, uid: "ms" } as AdmissionRequest,
          deps,
        ),
      () => handle("validate-models", modelReview(model(1)), deps),
      () => handle("validate-models", modelReview(model(1), model(1, "gpu-1")), deps),
    ];
    for (const leave of leaves) {
      leases.leases.clear();
      expect((await handle("validate-models", up, deps)).allowed).toBe(true);
      expect(leases.leases.get(claimKey)?.spec?.holderIdentity).toBe("Model/qwen");
      expect((await leave()).allowed).toBe(true);
      expect(leases.leases.has(claimKey)).toBe(false);
    }
  });

  test("only the member's own claim, and only a real write that leaves", async () => {
    await handle("validate-scale", scaleReview("qwen", 0, 1), deps);
    // Another member scaled down, a dry run, a count that stays up, a scale from 0 to 0: all keep it.
    await handle("validate-scale", scaleReview("llama", 1, 0), deps);
    await handle("validate-scale", scaleReview("qwen", 1, 0, { dryRun: true }), deps);
    await handle("validate-scale", scaleReview("qwen", 2, 1), deps);
    await handle("validate-scale", scaleReview("qwen", 0, 0), deps);
    await handle("validate-workloads", workloadReview("DELETE", deployment("qwen", 0)), deps);
    // Its Model (the same model under another name) scaled down does not release the workload's.
    cluster.models = [
      { ...model(1), spec: { ...model(1).spec, workloadRef: { kind: "Deployment", name: "qwen" } } },
    ];
    await handle("validate-models", modelReview(model(1), model(0)), deps);
    expect(leases.leases.get(claimKey)?.spec?.holderIdentity).toBe("Deployment/qwen");
    expect(leases.writes.map((w) => w.method)).toEqual(["POST"]);
  });

  test("a claim taken by someone else between the read and the release stays theirs", async () => {
    await handle("validate-scale", scaleReview("qwen", 0, 1), deps);
    leases.beforeWrite = async () => {
      const current = leases.leases.get(claimKey)!;
      leases.leases.set(claimKey, {
        ...current,
        metadata: { ...current.metadata, resourceVersion: "rewritten" },
        spec: { ...current.spec, holderIdentity: "Deployment/llama" },
      });
    };
    expect((await handle("validate-scale", scaleReview("qwen", 1, 0), deps)).allowed).toBe(true);
    expect(leases.leases.get(claimKey)?.spec?.holderIdentity).toBe("Deployment/llama");
  });

  test("a claim that cannot be released does not refuse the write", async () => {
    await handle("validate-scale", scaleReview("qwen", 0, 1), deps);
    leases.fail = new Error("apiserver unreachable");
    expect((await handle("validate-scale", scaleReview("qwen", 1, 0), deps)).allowed).toBe(true);
  });
});
