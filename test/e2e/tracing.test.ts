import { describe, expect, test } from "vitest";
import {
  CLIENT,
  type Collector,
  childrenOf,
  hex,
  names,
  otelEnv,
  SERVER,
  type Span,
  startCollector,
  tree,
} from "../support/otel-collector.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { createSharedGpuSlot, modelObject, simDeployment, system } from "./components/snooze.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Span trees on Kubernetes, through a real OpenTelemetry Collector beside the e2e cluster: the
 * activator and two autoscaler replicas export to it with nothing but the standard OTEL_* variables.
 * The activator sends its demand to the replica that does NOT hold the Leases, so every demand is
 * forwarded to the holder: the holder's activation must still continue the client's trace.
 */
let collector: Collector | undefined;
const slot = `gpu-trace-${Math.random().toString(36).slice(2, 6)}`;
const spans = () => collector!.spans;
const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-tracing",
  objects: async ({ admin, ns, cluster }) => {
    await admin.createDeployment(ns.name, simDeployment(cluster, "solo", { model: "solo" }));
    await admin.createModel(ns.name, modelObject("solo", { model: "solo", sleepAfter: "1m", port: 8000 }));
    await createSharedGpuSlot(admin, ns.name, cluster, slot, ["a", "b"]);
  },
  start: async (s) => {
    collector = await startCollector();
    const env = (instance: string) => otelEnv(collector!, { "service.instance.id": instance });
    await s.startAutoscaler("autoscaler-holder", { env: env("autoscaler-holder") });
    // Both Leases (the solo Model's and the slot's) with the first replica, before the second starts.
    await waitFor(
      async () => {
        const holders = await Promise.all(
          [`snooze-model-${s.ns.name}.solo`, `snooze-slot-${slot}`].map((lease) =>
            s.admin.client
              .get<any>(`/apis/coordination.k8s.io/v1/namespaces/${system}/leases/${lease}`)
              .then((l) => l.spec?.holderIdentity)
              .catch(() => undefined),
          ),
        );
        return holders.every((h) => h === "autoscaler-holder") ? true : undefined;
      },
      { what: "autoscaler-holder holds both Leases", timeoutMs: 15_000 },
    );
    const follower = await s.startAutoscaler("autoscaler-follower", { env: env("autoscaler-follower") });
    s.activator = await s.startActivator("activator-tracing", follower.url, env("activator-tracing"));
  },
  teardown: () => collector?.close(),
});

const logs = () =>
  [...suite.autoscalers.values()].map((a) => `${a.name}:\n${a.process.tail(10)}`).join("\n") +
  `\nactivator:\n${suite.activator.process.tail(10)}\ncollector:\n${collector?.log().slice(-2_000)}`;

/** An OpenAI completion through the activator with the caller's trace context. */
async function tracedCompletion(model: string, traceId = hex(32), callerSpan = hex(16)) {
  const response = await fetch(`${suite.activator.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", traceparent: `00-${traceId}-${callerSpan}-01` },
    body: JSON.stringify({ model, prompt: "hello", max_tokens: 3 }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  expect(response.status, `${model}: ${text}\n${logs()}`).toBe(200);
  return { traceId, callerSpan };
}

const serverSpanOf = (traceId: string) =>
  waitFor(async () => spans().find((s) => s.traceId === traceId && s.kind === SERVER), {
    what: "the request's server span at the receiver",
    timeoutMs: 10_000,
    detail: logs,
  });
const instanceOf = (span: Span) => span.resource["service.instance.id"];

describe("span trees on Kubernetes, through a real OpenTelemetry Collector", () => {
  test("a cold start: client's trace → activator → (demand forwarded by the follower) the holder's activation → engine call", async () => {
    const { traceId, callerSpan } = await tracedCompletion("solo");
    const server = await serverSpanOf(traceId);
    expect(server.service).toBe("snooze-activator");
    expect(instanceOf(server)).toBe("activator-tracing");
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.attrs).toMatchObject({ "http.route": "/v1/completions", "gen_ai.request.model": "solo" });

    const activation = await waitFor(
      async () =>
        spans().find(
          (s) =>
            s.name === "snooze.activation" && s.attrs["snooze.model"] === "solo" && s.traceId === traceId,
        ),
      {
        what: "the activation in the caller's trace",
        timeoutMs: 10_000,
        detail: () =>
          `${tree(spans(), server)}\nactivations: ${JSON.stringify(
            spans()
              .filter((s) => s.name === "snooze.activation")
              .map((s) => ({ trace: s.traceId, parent: s.parentSpanId, instance: instanceOf(s) })),
          )}\n${logs()}`,
      },
    );
    // Made by the Lease holder, whom the follower forwarded the demand to, inside the caller's trace.
    expect(activation.service).toBe("snooze-autoscaler");
    expect(instanceOf(activation)).toBe("autoscaler-holder");
    expect((await suite.autoscalers.get("autoscaler-follower")!.state()).counts.forwarded).toBeGreaterThan(0);
    // Its parent is the activator's span that sent the demand (the request's hold).
    const parent = spans().find((s) => s.spanId === activation.parentSpanId);
    expect(parent?.service, tree(spans(), server)).toBe("snooze-activator");
    expect(parent?.traceId).toBe(traceId);
    expect(activation.attrs).toMatchObject({ "snooze.activation": "start", "snooze.from_tier": "cold" });
    await waitFor(async () => (childrenOf(spans(), activation).length >= 2 ? true : undefined), {
      what: "the activation's children",
      timeoutMs: 5_000,
    });
    expect(names(childrenOf(spans(), activation))).toEqual(["snooze.start", "snooze.warmup"]);

    const underServer = childrenOf(spans(), server);
    const hold = underServer.find((s) => s.name === "snooze.hold")!;
    expect(hold, tree(spans(), server)).toBeDefined();
    expect(hold.links?.map((l) => l.spanId)).toContain(activation.spanId);
    // The engine call: a CLIENT span after the activation, with the engine's answer.
    const engineCall = underServer.find((s) => s.kind === CLIENT)!;
    expect(engineCall, tree(spans(), server)).toBeDefined();
    expect(engineCall.attrs).toMatchObject({
      "gen_ai.request.model": "solo",
      "http.response.status_code": 200,
    });
    expect(BigInt(activation.endTimeUnixNano) <= BigInt(engineCall.startTimeUnixNano)).toBe(true);
  }, 90_000);

  test("a slot swap: the holder's snooze.swap with the incumbent's drain and sleep and the target's wake; the held request links to it", async () => {
    await tracedCompletion("a");
    await tracedCompletion("b");
    const { traceId } = await tracedCompletion("a");
    const swap = await waitFor(
      async () =>
        spans().find(
          (s) =>
            s.name === "snooze.swap" &&
            // On Kubernetes a slot's members are Models: `namespace/name`.
            s.attrs["snooze.swap.to"] === `${suite.ns.name}/a` &&
            s.attrs["snooze.swap.from"] === `${suite.ns.name}/b`,
        ),
      { what: "the swap b → a", timeoutMs: 10_000, detail: logs },
    );
    expect(instanceOf(swap)).toBe("autoscaler-holder");
    expect(swap.attrs["snooze.slot"]).toBe(slot);
    await waitFor(async () => (childrenOf(spans(), swap).length >= 3 ? true : undefined), {
      what: "the swap's children",
      timeoutMs: 5_000,
      detail: () => tree(spans(), swap),
    });
    expect(names(childrenOf(spans(), swap)), tree(spans(), swap)).toEqual([
      "snooze.activation",
      "snooze.drain",
      "snooze.sleep",
    ]);
    const activation = childrenOf(spans(), swap).find((s) => s.name === "snooze.activation")!;
    expect(activation.attrs).toMatchObject({ "snooze.model": "a", "snooze.activation": "wake" });
    await waitFor(async () => (childrenOf(spans(), activation).length >= 2 ? true : undefined), {
      what: "the wake's children",
      timeoutMs: 5_000,
    });
    expect(names(childrenOf(spans(), activation))).toEqual(["snooze.wake", "snooze.warmup"]);
    const sleep = childrenOf(spans(), swap).find((s) => s.name === "snooze.sleep")!;
    expect(sleep.attrs["snooze.model"]).toBe("b");
    const wake = childrenOf(spans(), activation).find((s) => s.name === "snooze.wake")!;
    expect(BigInt(sleep.endTimeUnixNano) <= BigInt(wake.startTimeUnixNano)).toBe(true);

    const server = await serverSpanOf(traceId);
    const hold = childrenOf(spans(), server).find((s) => s.name === "snooze.hold")!;
    expect(hold, tree(spans(), server)).toBeDefined();
    // The activator in its own process learns of the activation from the pod it watches (the
    // traceparent annotation while it wakes): the hold links to the swap's activation.
    expect(hold.links?.map((l) => l.spanId)).toContain(activation.spanId);
    expect(childrenOf(spans(), server).some((s) => s.kind === CLIENT)).toBe(true);
  }, 90_000);
});
