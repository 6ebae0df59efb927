import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseIncomingEvents } from "../activator/incoming-event.ts";
import { defaultEventsAudience } from "../activator/kube-event-senders.ts";
import { autoscalerClass, classAnnotation } from "../lib/knative/autoscaler-class.ts";
import { ingressClassAnnotation, snoozeIngressClass } from "../lib/knative/ingress-class.ts";
import { modelSpec } from "../lib/kube/model-resource.ts";
import { slotSpec } from "../lib/kube/slot-resource.ts";
import { settingsFromAnnotations } from "../lib/settings/annotations.ts";

// The examples in config/samples/ are read by Snooze's own schemas here; the e2e suite checks that
// a real apiserver accepts them (server-side dry-run).
const docs = (file: string) =>
  parseAllDocuments(readFileSync(resolve(import.meta.dirname, "../config/samples", file), "utf8")).map(
    (doc) =>
      doc.toJS() as { kind: string; metadata: { annotations?: Record<string, string> }; spec: unknown },
  );

/** What a PingSource delivers: binary mode, its own type, the overrides as extensions, the data as the body. */
const pingDelivery = (spec: {
  contentType: string;
  ceOverrides: { extensions: Record<string, string> };
}): Record<string, string> => ({
  "content-type": spec.contentType,
  "ce-specversion": "1.0",
  "ce-id": "3b2c5f0e-0b59-4d5f-9a4e-1f0f5f0d3c11",
  "ce-source": "/apis/v1/namespaces/default/pingsources/prewarm-qwen",
  "ce-type": "dev.knative.sources.ping",
  "ce-time": "2026-01-05T06:55:00Z",
  ...Object.fromEntries(Object.entries(spec.ceOverrides.extensions).map(([k, v]) => [`ce-${k}`, v])),
});

describe("config/samples", () => {
  test("the Model in front of the vLLM Deployment is valid and names that Deployment", () => {
    const [deployment, model] = docs("vllm-model.yaml");
    expect(deployment?.kind).toBe("Deployment");
    expect(model?.kind).toBe("Model");
    const spec = modelSpec.parse(model?.spec);
    expect(spec.workloadRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: "qwen" });
    expect(spec.sleepAfter).toBe(600_000);
  });

  test("the Slot is valid", () => {
    const [slot] = docs("slot.yaml");
    expect(slotSpec.parse(slot?.spec).policy).toBe("priority");
  });

  test("the Knative Service: Snooze's classes, and valid tier settings on its revision template", () => {
    const [service] = docs("knative-service.yaml") as unknown as [
      {
        metadata: { annotations: Record<string, string> };
        spec: { template: { metadata: { annotations: Record<string, string> } } };
      },
    ];
    const template = service.spec.template.metadata.annotations;
    expect(template[classAnnotation]).toBe(autoscalerClass);
    expect(service.metadata.annotations[ingressClassAnnotation]).toBe(snoozeIngressClass);
    const { settings, problems } = settingsFromAnnotations(template);
    expect(problems).toEqual([]);
    expect(settings).toMatchObject({ sleepAfter: 300_000, sleepLevel: 2, holdBudget: 120_000 });
  });

  test("the scheduled prewarm: the PingSource's event is read as a prewarm, sent to the events endpoint with a token its own ServiceAccount may use for qwen only", () => {
    const [ping, role, binding] = docs("scheduled-prewarm.yaml") as unknown as [
      {
        kind: string;
        metadata: { name: string };
        spec: {
          data: string;
          contentType: string;
          ceOverrides: { extensions: Record<string, string> };
          sink: { uri: string; audience: string };
        };
      },
      { kind: string; metadata: { name: string }; rules: Record<string, string[]>[] },
      { kind: string; roleRef: { name: string }; subjects: { kind: string; name: string }[] },
    ];
    expect(ping.kind).toBe("PingSource");
    expect(parseIncomingEvents(pingDelivery(ping.spec), Buffer.from(ping.spec.data))).toMatchObject({
      ok: true,
      mode: "binary",
      commands: [{ verb: "prewarm", model: "qwen", forMs: 2 * 3_600_000 }],
    });
    expect(new URL(ping.spec.sink.uri).pathname).toBe("/snooze/v1/events");
    expect(ping.spec.sink.audience).toBe(defaultEventsAudience);
    expect(role.rules).toEqual([
      { apiGroups: ["snooze.dev"], resources: ["models"], resourceNames: ["qwen"], verbs: ["prewarm"] },
    ]);
    expect(binding.roleRef.name).toBe(role.metadata.name);
    // As Knative Eventing names a PingSource's OIDC identity (seen in e2e with a real Eventing).
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: `${ping.metadata.name}-oidc-sources.knative.dev-pingsource` },
    ]);
  });

  test("the scheduled prewarm through a Broker: the Trigger selects the PingSource's event", () => {
    const [ping, trigger, role, binding] = docs("trigger-prewarm.yaml") as unknown as [
      {
        kind: string;
        spec: { data: string; contentType: string; ceOverrides: { extensions: Record<string, string> } };
      },
      {
        kind: string;
        metadata: { name: string };
        spec: {
          filter: { attributes: Record<string, string> };
          subscriber: { uri: string; audience: string };
        };
      },
      { kind: string; metadata: { name: string }; rules: Record<string, string[]>[] },
      { kind: string; roleRef: { name: string }; subjects: { kind: string; name: string }[] },
    ];
    expect(ping.kind).toBe("PingSource");
    expect(trigger.kind).toBe("Trigger");
    const headers = pingDelivery(ping.spec);
    for (const [attribute, value] of Object.entries(trigger.spec.filter.attributes))
      expect(headers[`ce-${attribute}`]).toBe(value);
    expect(parseIncomingEvents(headers, Buffer.from(ping.spec.data))).toMatchObject({
      ok: true,
      mode: "binary",
      commands: [{ verb: "prewarm", model: "qwen", forMs: 2 * 3_600_000 }],
    });
    expect(new URL(trigger.spec.subscriber.uri).pathname).toBe("/snooze/v1/events");
    // Knative mints the Trigger's token for the activator's audience; its ServiceAccount (named as
    // Knative Eventing names a Trigger's OIDC identity) may prewarm qwen, and only that.
    expect(trigger.spec.subscriber.audience).toBe(defaultEventsAudience);
    expect(role.kind).toBe("Role");
    expect(role.rules).toEqual([
      { apiGroups: ["snooze.dev"], resources: ["models"], resourceNames: ["qwen"], verbs: ["prewarm"] },
    ]);
    expect(binding.roleRef.name).toBe(role.metadata.name);
    expect(binding.subjects).toEqual([
      { kind: "ServiceAccount", name: `${trigger.metadata.name}-oidc-eventing.knative.dev-trigger` },
    ]);
  });
});
