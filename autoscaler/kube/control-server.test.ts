import { once } from "node:events";
import { type AddressInfo, connect } from "node:net";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { Registry } from "prom-client";
import { afterAll, beforeAll, expect, test } from "vitest";
import { adminPath, demandPath } from "../../lib/control-protocol.ts";
import { Harness } from "../../test/support/autoscaler-harness.ts";
import { lintExposition } from "../../test/support/promlint.ts";
import type { KubeAutoscaler } from "./autoscaler.ts";
import { createControlServer } from "./control-server.ts";

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  context.disable();
  propagation.disable();
});

test("a demand carries the activator's trace context into the autoscaler: it is the active context while the demand is acted on", async () => {
  const seen: (string | undefined)[] = [];
  const autoscaler = {
    demand: () => void seen.push(trace.getSpanContext(context.active())?.traceId),
  } as unknown as KubeAutoscaler;
  const server = createControlServer(autoscaler, new Registry(), {
    authenticate: async () => ({
      ok: true,
      username: "system:serviceaccount:snooze-system:snooze-activator",
    }),
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${demandPath}`;
    const body = JSON.stringify({ activator: "a-1", model: "qwen" });
    const traced = await fetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
      body,
    });
    expect(traced.status).toBe(202);
    const untraced = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    expect(untraced.status).toBe(202);
    expect(seen).toEqual(["4bf92f3577b34da6a3ce929d0e0e4736", undefined]);
  } finally {
    server.close();
  }
});

test("a prewarm's forMs reaches the autoscaler from the admin route; without a usable one it is a 400 that says what to send", async () => {
  const calls: unknown[][] = [];
  const autoscaler = {
    modelDemand: { handle: () => false },
    admin: async (...args: unknown[]) => {
      calls.push(args);
      return { status: 200, message: "prewarm: kept awake for 600000 ms", keptMs: 600_000 };
    },
  } as unknown as KubeAutoscaler;
  const server = createControlServer(autoscaler, new Registry(), {
    authenticate: async () => ({
      ok: true,
      username: "system:serviceaccount:snooze-system:snooze-activator",
    }),
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const ok = await fetch(`${base}${adminPath("qwen 3", "prewarm", { forMs: 600_000 })}`, {
      method: "POST",
    });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ keptMs: 600_000 });
    // The fifth is the caller's trace: none here.
    expect(calls).toEqual([["qwen 3", "prewarm", false, { forMs: 600_000 }, undefined]]);
    for (const query of ["", "?forMs=", "?forMs=-5", "?forMs=1.5", "?forMs=10m"]) {
      const bad = await fetch(`${base}/snooze/v1/models/qwen/prewarm${query}`, { method: "POST" });
      expect(bad.status, query).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toContain("?forMs=");
    }
    expect(calls).toHaveLength(1);
    // A listing's hint says so.
    await fetch(`${base}${adminPath("qwen", "prewarm", { forMs: 120_000, hint: true })}`, { method: "POST" });
    expect(calls[1]).toEqual(["qwen", "prewarm", false, { forMs: 120_000, hint: true }, undefined]);
    // The other verbs carry none.
    await fetch(`${base}${adminPath("qwen", "wake", { forMs: 5_000 })}`, { method: "POST" });
    expect(calls[2]).toEqual(["qwen", "wake", false, undefined, undefined]);
    // An event's prewarm without `for` (or with "0s"): a wake at prewarm priority, nothing kept; it
    // was refused, so the event, answered 202, woke nothing (found by an outside tester).
    const none = await fetch(`${base}${adminPath("qwen", "prewarm", { forMs: 0 })}`, { method: "POST" });
    expect(none.status).toBe(200);
    expect(calls[3]).toEqual(["qwen", "prewarm", false, { forMs: 0 }, undefined]);
    // A malformed percent-escape in the model's name or a demand's key is the caller's error, not a 500.
    const malformed = await fetch(`${base}/snooze/v1/models/qw%ZZen/wake`, { method: "POST" });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: string }).error).toContain(
      "`qw%ZZen` has a malformed percent-escape",
    );
    expect(calls).toHaveLength(4);
  } finally {
    server.close();
  }
});

test("a demand whose body stops arriving is answered 408 at the end of a window that brought too little, on a connection that closes, as the activator answers one", async () => {
  // Found by an outside tester: the body was read with no pace, so a caller that declared 100 bytes
  // and sent 12 held the request (and its connection) until Node's request timeout, 5 minutes.
  const demands: unknown[] = [];
  const autoscaler = { demand: (body: unknown) => void demands.push(body) } as unknown as KubeAutoscaler;
  const server = createControlServer(autoscaler, new Registry(), {
    authenticate: async () => ({
      ok: true,
      username: "system:serviceaccount:snooze-system:snooze-activator",
    }),
    bodyPace: { windowMs: 300, minBytes: 1024 },
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const socket = connect((server.address() as AddressInfo).port, "127.0.0.1");
  try {
    let answer = "";
    socket.on("data", (chunk: Buffer) => {
      answer += chunk.toString();
    });
    socket.write(
      `POST ${demandPath} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer t\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"activator"`,
    );
    await once(socket, "close");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer.toLowerCase()).toContain("connection: close");
    expect(answer).toContain("less than 1024 bytes of the request body came in 0.3s");
    expect(demands).toEqual([]);
  } finally {
    socket.destroy();
    server.close();
  }
}, 30_000);

test("the autoscaler's /metrics parses as Prometheus reads it and passes promlint: slot, model, learning and caller families", async () => {
  // The control plane of `snooze autoscaler` (one Autoscaler, models and a slot named as Models and
  // Slots are, namespace/name) behind its HTTP surface, read over a socket.
  const h = new Harness(
    `
slots:
  gpu: { minResidency: 0s, swapCooldown: 0s }
models:
  a: { slot: gpu, command: [engine, "\${PORT}"] }
  b: { slot: gpu, command: [engine, "\${PORT}"] }
`,
    { autoUp: true, direct: {} },
  );
  await h.serveCold("a");
  await h.serveCold("b");
  await h.advance(5_000);
  // Only its metrics are read here: the routes that act answer before they reach the autoscaler.
  const autoscaler = { modelDemand: { handle: () => false } } as unknown as KubeAutoscaler;
  const server = createControlServer(autoscaler, h.registry, {
    authenticate: async () => ({ ok: false, status: 401, message: "no token" }),
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const refused = await fetch(`${url}${demandPath}`, { method: "POST", body: "{}" });
    expect(refused.status).toBe(401);
    const response = await fetch(`${url}/metrics`);
    expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    const { families, problems } = await lintExposition(await response.text());
    expect(problems).toEqual([]);
    expect(Object.keys(families)).toEqual(
      expect.arrayContaining([
        "snooze_autoscaler_callers_total",
        "snooze_activation_duration_seconds",
        "snooze_gpu_seconds_total",
        "snooze_replica_tier",
        "snooze_slot_resident",
        "snooze_slot_swaps_total",
        "snooze_tier_transitions_total",
      ]),
    );
    expect(families.snooze_autoscaler_callers_total!.series).toEqual([{ outcome: "401" }]);
    expect(families.snooze_slot_swaps_total!.series).toEqual([{ slot: "gpu", from: "a", to: "b" }]);
  } finally {
    server.close();
  }
});
