import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { Registry } from "prom-client";
import { request } from "undici";
import { afterEach, describe, expect, test } from "vitest";
import type { KIngress } from "../lib/knative/ingress-class.ts";
import { silentLogger } from "../lib/log.ts";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { builtinTierDefaults, type ModelConfig } from "../lib/settings/index.ts";
import { PushedControlPlane } from "../test/support/pushed-control-plane.ts";
import { TableHosts } from "../test/support/table-hosts.ts";
import { Activator } from "./activator.ts";
import { createActivatorServer } from "./server.ts";

const host = "qwen.team-a.example.com";
const ingress = (splits: { revision: string; percent: number }[], generation = 1): KIngress => ({
  metadata: { name: "qwen", namespace: "team-a", uid: "u1", generation },
  spec: {
    rules: [
      {
        hosts: [host],
        visibility: "ExternalIP",
        http: {
          paths: [
            {
              splits: splits.map((s) => ({
                serviceNamespace: "team-a",
                serviceName: s.revision,
                servicePort: 80,
                percent: s.percent,
                appendHeaders: { "Knative-Serving-Revision": s.revision },
              })),
            },
          ],
        },
      },
    ],
  },
});

const model = (id: string): ModelConfig => ({
  ...builtinTierDefaults,
  id,
  aliases: [],
  command: [],
  env: {},
});

const servers: Server[] = [];
let activator: Activator | undefined;
afterEach(async () => {
  await activator?.shutdown(100);
  activator = undefined;
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An engine that answers with what it received. */
async function engine(name: string) {
  return listen(
    createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ engine: name, body, revision: req.headers["knative-serving-revision"] }));
      });
    }),
  );
}

async function start(models: Record<string, string>) {
  const plane = new PushedControlPlane();
  const hosts = new TableHosts(new Map(Object.entries(models)));
  activator = new Activator({
    config: {
      models: new Map(),
      names: new Map(),
      slots: new Map(),
      hostMemoryBudget: Infinity,
      maxBodySize: 1 << 20,
    },
    controlPlane: plane,
    registry: new Registry(),
    log: silentLogger,
    hosts,
  });
  for (const id of new Set(Object.values(models))) activator.upsertModel(model(id));
  const url = `http://${await listen(
    createActivatorServer({
      activator,
      registry: new Registry(),
      admin: {
        wake: async () => {},
        sleep: async () => {},
        stop: async () => {},
        details: () => ({}),
        slots: async () => [],
      },
    }),
  )}`;
  // undici's request, not fetch: fetch does not let a caller set Host.
  const post = async (
    headers: Record<string, string>,
    body: unknown = { model: "anything", prompt: "hi" },
  ) => {
    const answer = await request(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    return { status: answer.statusCode, json: () => answer.body.json() };
  };
  return { plane, hosts, url, post };
}

const ready = (id: string, address: string): ReplicaEvent => ({
  model: id,
  replica: `${id}-0`,
  address,
  tier: "ready",
  since: Date.now(),
});

describe("routing by Host (Snooze's Knative ingress class)", () => {
  test("the Host picks the revision's Model; the body goes as sent, with the appended headers", async () => {
    const { plane, hosts, post } = await start({ "team-a/qwen-00001": "team-a-qwen-00001" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    plane.emit(ready("team-a-qwen-00001", await engine("one")));
    const answer = await post({ host: `${host}:80` });
    expect(answer.status).toBe(200);
    const echoed = (await answer.json()) as { engine: string; body: string; revision: string };
    expect(echoed.engine).toBe("one");
    expect(JSON.parse(echoed.body)).toEqual({ model: "anything", prompt: "hi" });
    expect(echoed.revision).toBe("qwen-00001");
  });

  test("traced: the GenAI request model is what the client asked and the engine was sent, not the revision; the revision is a snooze.* attribute", async () => {
    // Found by an outside tester: the CLIENT span was `completions qwen-00001`, its
    // gen_ai.request.model the revision's Model, while the engine was sent `model: "qwen"`.
    const exporter = new InMemorySpanExporter();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(
      new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
    );
    try {
      const { plane, hosts, post } = await start({ "team-a/qwen-00001": "team-a-qwen-00001" });
      hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
      plane.emit(ready("team-a-qwen-00001", await engine("one")));
      const answer = await post({ host }, { model: "qwen", prompt: "hi" });
      expect(answer.status).toBe(200);
      expect(JSON.parse(((await answer.json()) as { body: string }).body).model).toBe("qwen");
      const client = exporter.getFinishedSpans().find((s) => s.kind === SpanKind.CLIENT)!;
      expect(client.name).toBe("text_completion qwen");
      expect(client.attributes).toMatchObject({
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": "qwen",
        "snooze.model": "team-a-qwen-00001",
        "snooze.revision": "team-a/qwen-00001",
      });
      const serverSpan = () => exporter.getFinishedSpans().find((s) => s.kind === SpanKind.SERVER);
      // The server span ends just after the answer does.
      for (let i = 0; i < 100 && !serverSpan(); i++) await new Promise((r) => setTimeout(r, 10));
      const server = serverSpan()!;
      expect(server.attributes).toMatchObject({
        "gen_ai.request.model": "qwen",
        "snooze.model": "team-a-qwen-00001",
      });
    } finally {
      trace.disable();
      context.disable();
    }
  });

  test("a request for a cold revision is held, demand goes out at once, and it is answered when ready", async () => {
    const { plane, hosts, post } = await start({ "team-a/qwen-00001": "rev1" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    const held = post({ host });
    for (let i = 0; i < 200 && plane.demanded.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(plane.demanded).toEqual(["rev1"]);
    plane.emit(ready("rev1", await engine("one")));
    expect((await held).status).toBe(200);
  });

  test("a 50/50 split sends 100 of 200 requests to each revision", async () => {
    const { plane, hosts, post } = await start({ "team-a/qwen-00001": "rev1", "team-a/qwen-00002": "rev2" });
    hosts.set([
      ingress([
        { revision: "qwen-00001", percent: 50 },
        { revision: "qwen-00002", percent: 50 },
      ]),
    ]);
    plane.emit(ready("rev1", await engine("one")));
    plane.emit(ready("rev2", await engine("two")));
    const counts: Record<string, number> = {};
    for (let i = 0; i < 200; i++) {
      const { engine: name } = (await (await post({ host })).json()) as { engine: string };
      counts[name] = (counts[name] ?? 0) + 1;
    }
    expect(counts).toEqual({ one: 100, two: 100 });
  });

  test("new splits apply to the next request; the old revision takes none", async () => {
    const { plane, hosts, post } = await start({ "team-a/qwen-00001": "rev1", "team-a/qwen-00002": "rev2" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    plane.emit(ready("rev1", await engine("one")));
    plane.emit(ready("rev2", await engine("two")));
    expect(((await (await post({ host })).json()) as { engine: string }).engine).toBe("one");
    hosts.set([ingress([{ revision: "qwen-00002", percent: 100 }], 2)]);
    for (let i = 0; i < 5; i++)
      expect(((await (await post({ host })).json()) as { engine: string }).engine).toBe("two");
  });

  test("another host keeps routing by the body's model", async () => {
    const { plane, hosts, post } = await start({ "team-a/qwen-00001": "rev1" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    plane.emit(ready("rev1", await engine("one")));
    expect((await post({ host: "snooze-activator.snooze-system" }, { model: "rev1" })).status).toBe(200);
    const unknown = await post({ host: "snooze-activator.snooze-system" }, { model: "nope" });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
  });

  test("an unknown host with no model is a 404 that names the known hosts", async () => {
    const { hosts, post } = await start({ "team-a/qwen-00001": "rev1" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    const answer = await post({ host: "other.team-a.example.com" }, { prompt: "hi" });
    expect(answer.status).toBe(404);
    const { error } = (await answer.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("host_not_found");
    expect(error.message).toContain(host);
  });

  test("a split to a revision without a Model is refused with what to change", async () => {
    const { hosts, post } = await start({});
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    const answer = await post({ host });
    expect(answer.status).toBe(503);
    const { error } = (await answer.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("revision_not_served");
    expect(error.message).toContain("team-a/qwen-00001");
    expect(error.message).toContain("autoscaler class");
  });

  test("a refused host is answered before the body: no 100 Continue, the body never sent", async () => {
    const { hosts, url } = await start({});
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }])]);
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    let reply = "";
    socket.on("data", (chunk) => (reply += chunk));
    socket.write(
      `POST /v1/completions HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\n` +
        "content-length: 100000\r\nexpect: 100-continue\r\n\r\n",
    );
    await once(socket, "end");
    expect(reply).not.toContain("100 Continue");
    expect(reply.startsWith("HTTP/1.1 503")).toBe(true);
    expect(reply.toLowerCase()).toContain("connection: close");
    expect(reply).toContain("revision_not_served");
  });

  test("Knative's readiness probe is answered with the version of the host's KIngress", async () => {
    const { hosts, url } = await start({ "team-a/qwen-00001": "rev1" });
    hosts.set([ingress([{ revision: "qwen-00001", percent: 100 }], 7)]);
    const probe = async (h: string) => {
      const answer = await request(`${url}/healthz`, { headers: { host: h, "k-network-probe": "probe" } });
      await answer.body.dump();
      return answer;
    };
    const known = await probe(host);
    expect(known.statusCode).toBe(200);
    expect(known.headers["k-network-hash"]).toBe("u1/7");
    expect((await probe("other.example.com")).statusCode).toBe(404);
  });
});
