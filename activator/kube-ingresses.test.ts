import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test, vi } from "vitest";
import { ingressClassAnnotation, type KIngress, snoozeIngressClass } from "../lib/knative/ingress-class.ts";
import * as routes from "../lib/knative/ingress-routes.ts";
import { KubeClient } from "../lib/kube/client.ts";
import { silentLogger } from "../lib/log.ts";
import { KubeIngresses } from "./kube-ingresses.ts";

vi.mock("../lib/knative/ingress-routes.ts", async (original) => {
  const actual = await original<typeof import("../lib/knative/ingress-routes.ts")>();
  return { ...actual, compileHostTable: vi.fn(actual.compileHostTable) };
});

const ingress = (n: number): KIngress => ({
  metadata: {
    name: `svc-${n}`,
    namespace: "team-a",
    uid: `u${n}`,
    generation: 1,
    resourceVersion: String(n),
    annotations: { [ingressClassAnnotation]: snoozeIngressClass },
  },
  spec: {
    rules: [
      {
        hosts: [`svc-${n}.team-a.example.com`],
        http: { paths: [{ splits: [{ serviceNamespace: "team-a", serviceName: `svc-${n}-00001` }] }] },
      },
    ],
  },
});

/** A stand-in API: lists `items`; a watch stays open, and `send` writes an event to it. */
async function stubApi(items: KIngress[]) {
  let watch: ServerResponse | undefined;
  let watching: () => void = () => {};
  const watched = new Promise<void>((resolve) => (watching = resolve));
  const server: Server = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    if (new URL(req.url ?? "/", "http://x").searchParams.get("watch")) {
      watch = res;
      res.flushHeaders();
      watching();
      return;
    }
    res.end(JSON.stringify({ kind: "IngressList", metadata: { resourceVersion: "1000" }, items }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const client = new KubeClient({ server: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  return {
    client,
    watched,
    send: (type: string, object: KIngress) => watch?.write(`${JSON.stringify({ type, object })}\n`),
    async close() {
      await client.close();
      server.closeAllConnections();
      server.close();
    },
  };
}

let api: Awaited<ReturnType<typeof stubApi>> | undefined;
let ingresses: KubeIngresses | undefined;
afterEach(async () => {
  await ingresses?.stop();
  await api?.close();
  ingresses = undefined;
  api = undefined;
  vi.mocked(routes.compileHostTable).mockClear();
});

describe("KubeIngresses", () => {
  test("a list of many KIngresses is compiled into the host table once, not once per KIngress", async () => {
    api = await stubApi(Array.from({ length: 200 }, (_, n) => ingress(n)));
    ingresses = new KubeIngresses({
      client: api.client,
      log: silentLogger,
      modelOf: (ns, name) => `${ns}/${name}`,
    });
    await ingresses.start();
    expect(ingresses.hosts()).toHaveLength(200);
    expect(ingresses.route("svc-7.team-a.example.com", "/v1/completions", {})).toMatchObject({
      kind: "model",
      model: "team-a/svc-7-00001",
    });
    // The start's own compilation, and at most one for the list's burst of events.
    expect(vi.mocked(routes.compileHostTable).mock.calls.length).toBeLessThanOrEqual(2);
  });

  test("a KIngress added through the watch routes its host", async () => {
    api = await stubApi([ingress(1)]);
    ingresses = new KubeIngresses({
      client: api.client,
      log: silentLogger,
      modelOf: (ns, name) => `${ns}/${name}`,
    });
    await ingresses.start();
    expect(ingresses.route("svc-2.team-a.example.com", "/", {})).toEqual({ kind: "none" });
    await api.watched;
    api.send("ADDED", ingress(2));
    await vi.waitFor(() =>
      expect(ingresses?.route("svc-2.team-a.example.com", "/", {})).toMatchObject({
        kind: "model",
        model: "team-a/svc-2-00001",
      }),
    );
    expect(ingresses.version("svc-2.team-a.example.com")).toBe("u2/1");
  });
});
