import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterEach, describe, expect, test } from "vitest";
import { Activator } from "../../activator/activator.ts";
import { createActivatorServer } from "../../activator/server.ts";
import { probeActivators } from "../../autoscaler/kube/knative-ingress/activator-prober.ts";
import type { ControlPlane } from "../../lib/control-plane.ts";
import type { KIngress } from "../../lib/knative/ingress-class.ts";
import { silentLogger } from "../../lib/log.ts";
import { TableHosts } from "../support/table-hosts.ts";

/**
 * The ingress reconciler's readiness probe against real activators: Ready only once every one of
 * them routes the KIngress's generation (Knative's K-Network-Probe / K-Network-Hash exchange).
 */
const idle: ControlPlane = { demand() {}, stats() {}, watch: () => () => {} };
const host = "chat.team-a.example.com";
const ingress = (generation: number): KIngress => ({
  metadata: { name: "chat", namespace: "team-a", uid: "u1", generation },
  spec: {
    rules: [
      {
        hosts: [host],
        http: { paths: [{ splits: [{ serviceNamespace: "team-a", serviceName: "chat-00001" }] }] },
      },
    ],
  },
});

const running: { activator: Activator; server: Server }[] = [];
afterEach(async () => {
  for (const { activator, server } of running.splice(0)) {
    await activator.shutdown(100);
    server.closeAllConnections();
    server.close();
  }
});

async function activatorWith(generation: number) {
  const hosts = new TableHosts(new Map([["team-a/chat-00001", "chat-00001"]]));
  hosts.set([ingress(generation)]);
  const activator = new Activator({
    config: {
      models: new Map(),
      names: new Map(),
      slots: new Map(),
      hostMemoryBudget: Infinity,
      maxBodySize: 1 << 20,
    },
    controlPlane: idle,
    registry: new Registry(),
    log: silentLogger,
    hosts,
  });
  const server = createActivatorServer({
    activator,
    registry: new Registry(),
    admin: {
      wake: async () => {},
      sleep: async () => {},
      stop: async () => {},
      details: () => ({}),
      slots: async () => [],
    },
  });
  running.push({ activator, server });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { hosts, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe("probing the activators for a KIngress generation", () => {
  test("ready only when every activator routes it; the message names the one behind", async () => {
    const [a, b] = [await activatorWith(2), await activatorWith(1)];
    const behind = await probeActivators([a.url, b.url], host, "u1/2");
    expect(behind.ready).toBe(false);
    if (!behind.ready) {
      expect(behind.message).toContain("1 of 2");
      expect(behind.message).toContain(`${b.url} answered 200 with version u1/1`);
    }
    b.hosts.set([ingress(2)]);
    expect(await probeActivators([a.url, b.url], host, "u1/2")).toEqual({ ready: true });
  });

  test("an activator that does not know the host, one that does not answer, and none at all are not ready", async () => {
    const a = await activatorWith(1);
    const unknown = await probeActivators([a.url], "other.example.com", "u1/1");
    expect(unknown.ready === false && unknown.message).toContain("answered 404");
    // A port nothing listens on (the activator's own, once closed).
    const gone = await activatorWith(1);
    const { server, activator } = running.pop()!;
    await activator.shutdown(100);
    server.close();
    await once(server, "close");
    expect((await probeActivators([gone.url], host, "u1/1", 500)).ready).toBe(false);
    expect(await probeActivators([], host, "u1/1")).toEqual({
      ready: false,
      message: "No activator endpoints to probe yet.",
    });
  });
});
