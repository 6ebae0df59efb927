import { describe, expect, test } from "vitest";
import type { UserInfo } from "./admission.ts";
import { selectorString, workloadResidentTier, workloadSlot } from "./slot-members.ts";
import {
  decideResidency,
  isSystemController,
  modelIntent,
  modelRemoval,
  type ResidencyIntent,
  type SlotState,
  scaleIntent,
  serviceAccountNamespace,
  workloadIntent,
} from "./slot-residency.ts";

const autoscaler = {
  username: "system:serviceaccount:snooze-system:snooze-autoscaler",
  leaseNamespace: "snooze-system",
};
const person: UserInfo = { username: "alice" };
const holder: UserInfo = {
  username: autoscaler.username,
  extra: { "authentication.kubernetes.io/pod-name": ["as-0"] },
};
const other: UserInfo = {
  username: autoscaler.username,
  extra: { "authentication.kubernetes.io/pod-name": ["as-1"] },
};
const saOnly: UserInfo = { username: autoscaler.username };

const intent: ResidencyIntent = {
  slot: "gpu-0",
  member: { kind: "Deployment", name: "qwen" },
  change: "spec.replicas (scale) from 0 to 1",
  modelId: "qwen",
};
const llamaReady: SlotState = { residents: [{ kind: "Model", name: "llama", tier: "ready" }] };
const swapping: SlotState = { residents: [], transition: { from: "llama", to: "mistral", step: "draining" } };
const empty: SlotState = { residents: [] };
const selfResident: SlotState = { residents: [{ kind: "Deployment", name: "qwen", tier: "ready" }] };

describe("decideResidency", () => {
  test.each([
    { name: "empty slot, a person", state: empty, user: person, lease: undefined, allowed: true },
    {
      name: "the member itself is the resident",
      state: selfResident,
      user: person,
      lease: undefined,
      allowed: true,
    },
    { name: "another resident, a person", state: llamaReady, user: person, lease: undefined, allowed: false },
    { name: "swap in progress, a person", state: swapping, user: person, lease: undefined, allowed: false },
    {
      name: "another resident, the Lease holder",
      state: llamaReady,
      user: holder,
      lease: "as-0",
      allowed: true,
    },
    { name: "swap, the Lease holder", state: swapping, user: holder, lease: "as-0", allowed: true },
    {
      name: "another resident, autoscaler replica without the Lease",
      state: llamaReady,
      user: other,
      lease: "as-0",
      allowed: false,
    },
    {
      name: "no Lease at all, autoscaler pod",
      state: llamaReady,
      user: holder,
      lease: undefined,
      allowed: false,
    },
    {
      name: "token without pod name: the ServiceAccount suffices",
      state: llamaReady,
      user: saOnly,
      lease: undefined,
      allowed: true,
    },
    {
      name: "someone else's ServiceAccount with the same pod name",
      state: llamaReady,
      user: { username: "system:serviceaccount:team-a:impostor", extra: holder.extra },
      lease: "as-0",
      allowed: false,
    },
  ])("$name → allowed $allowed", ({ state, user, lease, allowed }) => {
    expect(decideResidency(intent, state, user, autoscaler, lease).allowed).toBe(allowed);
  });

  test("a Model and the workload it serves are one member", () => {
    const same = { ...intent, sameAs: [{ kind: "Model", name: "qwen" }] };
    const state: SlotState = { residents: [{ kind: "Model", name: "qwen", tier: "ready" }] };
    expect(decideResidency(same, state, person, autoscaler).allowed).toBe(true);
    expect(decideResidency(intent, state, person, autoscaler).allowed).toBe(false);
  });

  test("the autoscaler's namespace comes from its ServiceAccount user name", () => {
    expect(serviceAccountNamespace("system:serviceaccount:snooze-system:snooze-autoscaler")).toBe(
      "snooze-system",
    );
    expect(serviceAccountNamespace("alice")).toBeUndefined();
  });

  test("the denial names the slot, the resident, and how to ask for a swap", () => {
    expect(decideResidency(intent, llamaReady, person, autoscaler).message).toBe(
      'slot "gpu-0" already has a resident: Model "llama" (ready); changing spec.replicas (scale) from 0 to 1 of Deployment "qwen" would make a second member resident. Only the Snooze autoscaler that holds the Lease snooze-slot-gpu-0 swaps members. To switch, ask for a swap: send a request for model "qwen" through the activator, or POST /snooze/v1/models/qwen/wake on the activator.',
    );
    expect(decideResidency(intent, swapping, person, autoscaler).message).toMatch(
      /^slot "gpu-0" is swapping from "llama" to "mistral" \(step draining\); changing/,
    );
    expect(decideResidency(intent, llamaReady, other, autoscaler, "as-0").message).toBe(
      'the autoscaler replica "as-1" does not hold the Lease snooze-slot-gpu-0 (held by "as-0"); only the holder swaps members of slot "gpu-0".',
    );
  });
});

const m = (spec: Record<string, unknown>, status?: Record<string, unknown>) => ({
  metadata: { name: "qwen" },
  spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" }, ...spec },
  ...(status ? { status } : {}),
});

describe("modelIntent: does the write make the Model want its slot?", () => {
  test.each([
    {
      name: "create with replicas 1 in a slot",
      old: undefined,
      now: m({ slot: "s", replicas: 1 }),
      change: "spec.replicas from 0 to 1",
    },
    { name: "create without replicas", old: undefined, now: m({ slot: "s" }), change: undefined },
    {
      name: "0 → 1",
      old: m({ slot: "s", replicas: 0 }),
      now: m({ slot: "s", replicas: 1 }),
      change: "spec.replicas from 0 to 1",
    },
    {
      name: "minReplicas 0 → 1",
      old: m({ slot: "s" }),
      now: m({ slot: "s", minReplicas: 1 }),
      change: "spec.minReplicas from 0 to 1",
    },
    {
      name: "1 → 1 (label change)",
      old: m({ slot: "s", replicas: 1 }),
      now: m({ slot: "s", replicas: 1 }),
      change: undefined,
    },
    {
      name: "1 → 0",
      old: m({ slot: "s", replicas: 1 }),
      now: m({ slot: "s", replicas: 0 }),
      change: undefined,
    },
    { name: "no slot", old: m({ replicas: 0 }), now: m({ replicas: 1 }), change: undefined },
    {
      name: "joins a slot while awake",
      old: m({ replicas: 1 }),
      now: m({ slot: "s", replicas: 1 }),
      change: 'spec.slot from none to "s"',
    },
    {
      name: "moves slots while awake",
      old: m({ slot: "a", replicas: 1 }),
      now: m({ slot: "s", replicas: 1 }),
      change: 'spec.slot from "a" to "s"',
    },
  ])("$name", ({ old, now, change }) => {
    const result = modelIntent(old, now);
    if (change === undefined) expect(result).toBeUndefined();
    else
      expect(result).toEqual({ slot: "s", member: { kind: "Model", name: "qwen" }, change, modelId: "qwen" });
  });
});

const d = (replicas?: number) => ({
  metadata: { name: "qwen" },
  spec: replicas === undefined ? {} : { replicas },
});

describe("workloadIntent and scaleIntent", () => {
  test.each([
    {
      name: "create without replicas (defaults to 1)",
      old: undefined,
      now: d(),
      oldSlot: undefined,
      slot: "s",
      change: "spec.replicas from 0 to 1",
    },
    { name: "0 → 2", old: d(0), now: d(2), oldSlot: "s", slot: "s", change: "spec.replicas from 0 to 2" },
    { name: "1 → 2", old: d(1), now: d(2), oldSlot: "s", slot: "s", change: undefined },
    { name: "0 → 0", old: d(0), now: d(0), oldSlot: "s", slot: "s", change: undefined },
    { name: "not a member", old: d(0), now: d(1), oldSlot: undefined, slot: undefined, change: undefined },
    {
      name: "joins while running",
      old: d(1),
      now: d(1),
      oldSlot: undefined,
      slot: "s",
      change: 'annotation snooze.dev/slot from none to "s"',
    },
  ])("$name", ({ old, now, oldSlot, slot, change }) => {
    const result = workloadIntent("Deployment", old, now, oldSlot, slot, "qwen");
    expect(result?.change).toBe(change);
  });

  test("Knative Services are scaled by Knative: no intent", () => {
    expect(workloadIntent("Service", d(0), d(1), "s", "s", "q")).toBeUndefined();
  });

  test.each([
    { before: 0, after: 1, wanted: true },
    { before: 0, after: 0, wanted: false },
    { before: 1, after: 3, wanted: false },
    { before: undefined, after: 2, wanted: true },
  ])("scale $before → $after", ({ before, after, wanted }) => {
    const scale = (r?: number) => ({ spec: r === undefined ? {} : { replicas: r } });
    const member = { kind: "Deployment", name: "qwen" };
    expect(scaleIntent(scale(before), scale(after), member, "s", "qwen") !== undefined).toBe(wanted);
    expect(scaleIntent(scale(before), scale(after), member, undefined, "qwen")).toBeUndefined();
  });
});

describe("modelRemoval: a resident member may not leave its slot", () => {
  const resident = { replicaTiers: [{ pod: "p", tier: "ready", since: "2026-01-01T00:00:00Z" }] };
  const asleep = { replicaTiers: [{ pod: "p", tier: "asleep-1", since: "2026-01-01T00:00:00Z" }] };
  test.each([
    {
      name: "delete resident",
      old: m({ slot: "s" }, resident),
      now: undefined,
      denied: /deleting it is refused/,
    },
    { name: "delete asleep", old: m({ slot: "s" }, asleep), now: undefined, denied: undefined },
    { name: "delete no slot", old: m({}, resident), now: undefined, denied: undefined },
    {
      name: "remove slot while resident",
      old: m({ slot: "s" }, resident),
      now: m({}),
      denied: /removing spec.slot is refused/,
    },
    {
      name: "move slot while resident",
      old: m({ slot: "s" }, resident),
      now: m({ slot: "t" }),
      denied: /changing spec.slot to "t"/,
    },
    {
      name: "other change while resident",
      old: m({ slot: "s" }, resident),
      now: m({ slot: "s", sleepAfter: "1m" }),
      denied: undefined,
    },
  ])("$name", ({ old, now, denied }) => {
    const verdict = modelRemoval(old, now);
    if (denied === undefined) expect(verdict.allowed).toBe(true);
    else expect(verdict.message).toMatch(denied);
  });

  test("the message says how to get out", () => {
    expect(modelRemoval(m({ slot: "s" }, resident), undefined).message).toBe(
      'Model "qwen" is resident in slot "s" (ready) and may not leave the slot while resident: deleting it is refused. Let it sleep first (POST /snooze/v1/models/qwen/sleep on the activator, or scale it to 0), then retry.',
    );
  });

  test("Kubernetes' own controllers are exempt (namespace deletion, garbage collection)", () => {
    expect(isSystemController({ username: "system:serviceaccount:kube-system:namespace-controller" })).toBe(
      true,
    );
    expect(isSystemController({ username: "system:kube-controller-manager" })).toBe(true);
    expect(isSystemController({ username: "system:serviceaccount:team-a:kube-system" })).toBe(false);
  });
});

describe("slot members", () => {
  const pod = (tier?: string) => ({ metadata: { annotations: tier ? { "snooze.dev/tier": tier } : {} } });
  test.each([
    { replicas: 0, pods: [], tier: undefined },
    { replicas: 1, pods: [], tier: "starting" },
    { replicas: 1, pods: [pod("asleep-1")], tier: undefined },
    { replicas: 2, pods: [pod("asleep-2"), pod("ready")], tier: "ready" },
    { replicas: 1, pods: [pod()], tier: "running" },
    { replicas: 0, pods: [pod("draining")], tier: "draining" },
  ])("workload with $replicas replicas and pods $pods.length → $tier", ({ replicas, pods, tier }) => {
    expect(workloadResidentTier(d(replicas), pods)).toBe(tier);
  });

  test("a workload's slot: its annotation, else a Model pointing at it, else (Knative) its template", () => {
    const annotated = { metadata: { annotations: { "snooze.dev/slot": "a" } } };
    const model = { spec: { slot: "b" } };
    expect(workloadSlot("Deployment", annotated, [model])).toBe("a");
    expect(workloadSlot("Deployment", {}, [model])).toBe("b");
    expect(workloadSlot("Deployment", {}, [])).toBeUndefined();
    const knative = { spec: { template: { metadata: { annotations: { "snooze.dev/slot": "c" } } } } };
    expect(workloadSlot("Service", knative, [])).toBe("c");
    expect(workloadSlot("Deployment", knative, [])).toBeUndefined();
  });

  test("selector strings", () => {
    const workload = {
      spec: {
        selector: {
          matchLabels: { app: "qwen" },
          matchExpressions: [
            { key: "tier", operator: "In", values: ["a", "b"] },
            { key: "x", operator: "Exists" },
            { key: "y", operator: "DoesNotExist" },
          ],
        },
      },
    };
    expect(selectorString(workload)).toBe("app=qwen,tier in (a,b),x,!y");
    expect(selectorString({})).toBeUndefined();
  });
});
