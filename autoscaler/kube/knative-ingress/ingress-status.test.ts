import { describe, expect, test } from "vitest";
import type { KIngress } from "../../../lib/knative/ingress-class.ts";
import { type IngressFacts, ingressStatus, statusSignature } from "./ingress-status.ts";

const ingress = (status?: KIngress["status"]): KIngress => ({
  metadata: { name: "qwen", namespace: "team-a", generation: 4 },
  spec: { rules: [] },
  ...(status ? { status } : {}),
});
const domainInternal = "snooze-activator.snooze-system.svc.cluster.local";
const facts = (over: Partial<IngressFacts> = {}): IngressFacts => ({
  withoutModel: [],
  refusedHosts: [],
  probe: { ready: true },
  domainInternal,
  now: Date.parse("2026-05-01T10:00:00Z"),
  ...over,
});
const byType = (status: KIngress["status"]) =>
  Object.fromEntries((status?.conditions ?? []).map((c) => [c.type, c]));

describe("KIngress status", () => {
  test("served by every activator: Ready, both load balancers the activator's Service, this generation", () => {
    const status = ingressStatus(ingress(), facts());
    expect(status.observedGeneration).toBe(4);
    const c = byType(status);
    expect([c.NetworkConfigured?.status, c.LoadBalancerReady?.status, c.Ready?.status]).toEqual([
      "True",
      "True",
      "True",
    ]);
    expect(status.publicLoadBalancer).toEqual({ ingress: [{ domainInternal }] });
    expect(status.privateLoadBalancer).toEqual({ ingress: [{ domainInternal }] });
  });

  test("activators not there yet: Ready Unknown with why, and no load balancer for the Route to use", () => {
    const status = ingressStatus(
      ingress(),
      facts({ probe: { ready: false, message: "Waiting for 1 of 2" } }),
    );
    const c = byType(status);
    expect(c.NetworkConfigured?.status).toBe("True");
    expect(c.LoadBalancerReady).toMatchObject({ status: "Unknown", reason: "Uninitialized" });
    expect(c.Ready).toMatchObject({ status: "Unknown", message: "Waiting for 1 of 2" });
    expect(status.publicLoadBalancer).toBeUndefined();
  });

  test("a revision without a Model: Ready False, naming it and what to change", () => {
    const status = ingressStatus(ingress(), facts({ withoutModel: ["team-a/qwen-00002"] }));
    const c = byType(status);
    expect(c.NetworkConfigured).toMatchObject({ status: "False", reason: "RevisionWithoutModel" });
    expect(c.Ready).toMatchObject({ status: "False", reason: "RevisionWithoutModel" });
    expect(c.Ready?.message).toContain("team-a/qwen-00002");
    expect(c.Ready?.message).toContain("autoscaler class");
    expect(c.LoadBalancerReady?.status).toBe("Unknown");
  });

  test("a host an older KIngress has: Ready False HostConflict", () => {
    const c = byType(ingressStatus(ingress(), facts({ refusedHosts: ["qwen.team-a.example.com"] })));
    expect(c.Ready).toMatchObject({ status: "False", reason: "HostConflict" });
    expect(c.Ready?.message).toContain("qwen.team-a.example.com");
  });

  test("a condition keeps its transition time while its status stays; a changed one gets now", () => {
    const earlier = ingressStatus(ingress(), facts({ now: Date.parse("2026-05-01T09:00:00Z") }));
    const later = ingressStatus(
      ingress(earlier),
      facts({ now: Date.parse("2026-05-01T10:00:00Z"), withoutModel: ["team-a/x"] }),
    );
    const [before, after] = [byType(earlier), byType(later)];
    expect(after.LoadBalancerReady?.lastTransitionTime).toBe("2026-05-01T10:00:00Z");
    expect(after.NetworkConfigured?.lastTransitionTime).toBe("2026-05-01T10:00:00Z");
    const again = byType(
      ingressStatus(
        ingress(later),
        facts({ now: Date.parse("2026-05-01T11:00:00Z"), withoutModel: ["team-a/x"] }),
      ),
    );
    expect(again.Ready?.lastTransitionTime).toBe(after.Ready?.lastTransitionTime);
    expect(before.Ready?.lastTransitionTime).toBe("2026-05-01T09:00:00Z");
  });

  test("the signature ignores transition times and key order, so an unchanged status is not written again", () => {
    const status = ingressStatus(ingress(), facts());
    const served = JSON.parse(JSON.stringify({ privateLoadBalancer: status.privateLoadBalancer, ...status }));
    for (const c of served.conditions) c.lastTransitionTime = "2020-01-01T00:00:00Z";
    expect(statusSignature(served)).toBe(statusSignature(status));
    expect(statusSignature(ingressStatus(ingress(), facts({ refusedHosts: ["x"] })))).not.toBe(
      statusSignature(status),
    );
  });
});
