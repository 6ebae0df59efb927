import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { connect as connectHttp2 } from "node:http2";
import {
  type AddressInfo,
  connect as connectTcp,
  createServer as createNetServer,
  type Socket,
} from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { credentials, loadPackageDefinition, type ServiceError, status } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { forwardedHeader } from "../../lib/control-protocol.ts";
import { createLogger, silentLogger } from "../../lib/log.ts";
import { demandMetricName, ExternalScalerServer, scalerTargetOf } from "./external-scaler.ts";
import { type DemandSource, ModelDemand, type ModelLookup } from "./model-demand.ts";
import type { StreamLimits } from "./stream-cap.ts";

/** One autoscaler replica as the scaler sees it: which Models it knows, leads, and their load. */
class FakeReplica implements DemandSource {
  readonly identity: string;
  readonly models = new Map<string, ModelLookup>();
  private readonly listeners = new Set<(key: string, poke: boolean) => void>();
  constructor(identity: string) {
    this.identity = identity;
  }
  lookup(key: string) {
    return this.models.get(key);
  }
  onLoad(listener: (key: string, poke: boolean) => void) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  /** Watches of this replica's load open now (one per StreamIsActive it serves). */
  get watchers() {
    return this.listeners.size;
  }
  /** Leads `key` with this load; `poke` as an activator's demand does. */
  lead(key: string, inFlight: number, held: number, poke = false, desired?: number) {
    this.models.set(key, { leading: true, load: { inFlight, held }, desired });
    for (const l of this.listeners) l(key, poke);
  }
  follow(key: string, leader?: string) {
    this.models.set(key, { leading: false, leader });
  }
}

/**
 * A TCP relay to the scaler that can fall silent: it stops forwarding in both directions and
 * closes neither end, as a peer on a lost node or behind a partition looks to the server.
 */
class SilentRelay {
  private readonly server = createNetServer();
  private readonly sockets = new Set<Socket>();
  private silent = false;

  async to(port: number): Promise<number> {
    this.server.on("connection", (client) => {
      const upstream = connectTcp(port, "127.0.0.1");
      for (const [from, to] of [
        [client, upstream],
        [upstream, client],
      ] as const) {
        this.sockets.add(from);
        from.on("data", (chunk) => {
          if (!this.silent) to.write(chunk);
        });
        from.on("error", () => {});
      }
    });
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    return (this.server.address() as AddressInfo).port;
  }

  silence(): void {
    this.silent = true;
  }

  close(): void {
    for (const socket of this.sockets) socket.destroy();
    this.server.close();
  }
}

const protoPath = fileURLToPath(new URL("./externalscaler.proto", import.meta.url));
const Client = (
  loadPackageDefinition(loadSync(protoPath, { keepCase: true, longs: Number, defaults: true })) as any
).externalscaler.ExternalScaler;

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function scalerFor(
  replica: FakeReplica,
  demand = new ModelDemand({ source: replica, log: silentLogger, tickMs: 100 }),
  options: {
    keepaliveMs?: number;
    via?: (port: number) => Promise<number>;
    streamLimits?: StreamLimits;
    zeroRepushMs?: number;
  } = {},
) {
  const registry = new Registry();
  const server = new ExternalScalerServer({
    demand,
    perReplica: (key) => (replica.lookup(key) ? 1 : undefined),
    log: silentLogger,
    registry,
    repushMs: 300,
    zeroRepushMs: options.zeroRepushMs ?? 100,
    ...(options.keepaliveMs ? { keepaliveMs: options.keepaliveMs } : {}),
    ...(options.streamLimits ? { streamLimits: options.streamLimits } : {}),
  });
  const port = await server.listen("127.0.0.1", 0);
  const reached = options.via ? await options.via(port) : port;
  const client = new Client(`127.0.0.1:${reached}`, credentials.createInsecure());
  cleanups.push(
    () => server.close(100),
    () => client.close(),
  );
  const call = <T>(method: string, request: unknown) =>
    new Promise<T>((resolve, reject) =>
      client[method](request, (error: ServiceError | null, value: T) =>
        error ? reject(error) : resolve(value),
      ),
    );
  return { server, client, call, demand, port, registry };
}

/** The control server's demand route, as another replica reaches it. */
async function controlServer(demand: ModelDemand): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (!demand.handle(req, res, path, req.headers[forwardedHeader] !== undefined)) {
      res.writeHead(404);
      res.end();
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const ref = (metadata: Record<string, string>, namespace = "ml") => ({
  name: "qwen-scaler",
  namespace,
  scalerMetadata: { scalerAddress: "snooze-autoscaler.snooze-system:9090", ...metadata },
});

describe("the trigger's metadata", () => {
  it("names the Model by name in the ScaledObject's namespace, or by namespace/name", () => {
    expect(scalerTargetOf(ref({ model: "qwen" }))).toEqual({ key: "ml/qwen", targetDemand: undefined });
    expect(scalerTargetOf(ref({ model: "other/qwen", targetDemand: "2.5" }))).toEqual({
      key: "other/qwen",
      targetDemand: 2.5,
    });
    expect(scalerTargetOf(ref({ modelFromEnv: "qwen", enableTLS: "false" }))).toEqual({
      key: "ml/qwen",
      targetDemand: undefined,
    });
  });

  it.each([
    [{}, "scalerMetadata.model: required"],
    [{ model: "Qwen_3" }, "scalerMetadata.model:"],
    [{ model: "a/b/c" }, "scalerMetadata.model:"],
    [{ model: "qwen", targetDemand: "0" }, "scalerMetadata.targetDemand: must be a positive number"],
    [{ model: "qwen", targetDemand: "lots" }, "scalerMetadata.targetDemand:"],
    [{ model: "qwen", treshold: "5" }, "scalerMetadata.treshold: unknown field"],
    // KEDA hands the HPA the target in thousandths, as a 64-bit integer: less than 0.001 reads as
    // 0 and far more overflows, and the HPA refuses both ("must be positive").
    [{ model: "qwen", targetDemand: "0.0004" }, "scalerMetadata.targetDemand: must be between 0.001 and"],
    [{ model: "qwen", targetDemand: "1e-300" }, "scalerMetadata.targetDemand: must be between 0.001 and"],
    [{ model: "qwen", targetDemand: "1e16" }, "scalerMetadata.targetDemand: must be between 0.001 and"],
    // A namespace is a DNS-1123 label: no dots, at most 63 characters.
    [{ model: "a.b/qwen" }, "scalerMetadata.model:"],
    [{ model: `${"n".repeat(64)}/qwen` }, "scalerMetadata.model:"],
  ])("refuses %j naming the field", (metadata, message) => {
    expect(() => scalerTargetOf(ref(metadata as Record<string, string>))).toThrow(message);
  });

  it("takes a targetDemand from a thousandth up, and refuses a ScaledObject namespace that is no namespace", () => {
    expect(scalerTargetOf(ref({ model: "qwen", targetDemand: "0.001" })).targetDemand).toBe(0.001);
    expect(scalerTargetOf(ref({ model: "qwen", targetDemand: "1000000" })).targetDemand).toBe(1_000_000);
    expect(() => scalerTargetOf(ref({ model: "qwen" }, "a.b"))).toThrow("namespace:");
    expect(scalerTargetOf(ref({ model: "a-b/qwen.v2" }, "a.b"))).toEqual({
      key: "a-b/qwen.v2",
      targetDemand: undefined,
    });
  });
});

describe("the external scaler over gRPC", () => {
  it("answers IsActive, GetMetricSpec and GetMetrics with held + in-flight", async () => {
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 2, 3);
    const { call } = await scalerFor(replica);
    expect(await call("IsActive", ref({ model: "qwen" }))).toEqual({ result: true });
    expect(await call("GetMetricSpec", ref({ model: "qwen", targetDemand: "4" }))).toEqual({
      metricSpecs: [{ metricName: demandMetricName, targetSize: 4, targetSizeFloat: 4 }],
    });
    expect(await call("GetMetricSpec", ref({ model: "qwen" }))).toEqual({
      metricSpecs: [{ metricName: demandMetricName, targetSize: 1, targetSizeFloat: 1 }],
    });
    expect(
      await call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: demandMetricName }),
    ).toEqual({ metricValues: [{ metricName: demandMetricName, metricValue: 5, metricValueFloat: 5 }] });
    replica.lead("ml/qwen", 0, 0);
    expect(await call("IsActive", ref({ model: "qwen" }))).toEqual({ result: false });
  });

  it("refuses bad metadata with INVALID_ARGUMENT and an unknown Model with NOT_FOUND, naming the field", async () => {
    const replica = new FakeReplica("a");
    const { call } = await scalerFor(replica);
    await expect(call("IsActive", ref({ modle: "qwen" }))).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringContaining("scalerMetadata.modle: unknown field"),
    });
    // Accepted, it made KEDA write an HPA with a target of 0, which the apiserver refused.
    await expect(call("GetMetricSpec", ref({ model: "qwen", targetDemand: "0.0004" }))).rejects.toMatchObject(
      {
        code: status.INVALID_ARGUMENT,
        details: expect.stringContaining("scalerMetadata.targetDemand: must be between 0.001 and"),
      },
    );
    await expect(call("GetMetricSpec", ref({ model: "missing" }))).rejects.toMatchObject({
      code: status.NOT_FOUND,
      details: expect.stringContaining("scalerMetadata.model: no Model ml/missing"),
    });
    // With its own targetDemand too: the spec was given for a Model that does not exist (a typo in
    // model), KEDA made its HPA, and only the metrics failed after (found by an outside tester).
    const unknown = "scalerMetadata.model: no Model ml/missing is known to the autoscaler";
    await expect(call("GetMetricSpec", ref({ model: "missing", targetDemand: "4" }))).rejects.toMatchObject({
      code: status.NOT_FOUND,
      details: unknown,
    });
    await expect(call("IsActive", ref({ model: "missing", targetDemand: "4" }))).rejects.toMatchObject({
      code: status.NOT_FOUND,
      details: unknown,
    });
    await expect(
      call("GetMetrics", { scaledObjectRef: ref({ model: "missing" }), metricName: demandMetricName }),
    ).rejects.toMatchObject({
      code: status.NOT_FOUND,
      details: expect.stringContaining("scalerMetadata.model"),
    });
    replica.lead("ml/qwen", 0, 0);
    await expect(
      call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: "s0-other" }),
    ).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringContaining("metricName"),
    });
  });

  it("a huge key or value is refused with INVALID_ARGUMENT quoting the start of it, and the channel goes on", async () => {
    // The whole key went into the status message: a 1 MB one made a trailer no HTTP/2 client takes,
    // the client saw a protocol error instead of the field, and calls after it on that channel
    // failed too (found by an outside tester with grpc-js's client).
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 1, 0);
    const { call } = await scalerFor(replica);
    const huge = "k".repeat(1_000_000);
    for (const [metadata, field] of [
      [{ model: "qwen", [huge]: "1" }, "scalerMetadata.kkkk"],
      [{ model: `Q${huge}` }, "scalerMetadata.model"],
      [{ model: "q".repeat(254) }, "scalerMetadata.model"],
      [{ model: "qwen", targetDemand: huge }, "scalerMetadata.targetDemand"],
    ] as const) {
      const refused = await call("GetMetricSpec", ref(metadata)).catch((error: ServiceError) => error);
      expect(refused).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringContaining(field),
      });
      expect((refused as ServiceError).details.length).toBeLessThan(1_000);
    }
    const namespace = await call("IsActive", ref({ model: "qwen" }, huge)).catch(
      (error: ServiceError) => error,
    );
    expect(namespace).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: expect.stringContaining("namespace:"),
    });
    expect(await call("IsActive", ref({ model: "qwen" }))).toEqual({ result: true });
  });

  it("a refusal repeated by every poll is logged once, then at most once a minute with how many came since", async () => {
    // Each refusal was one log line: a misconfigured ScaledObject wrote the same line at every one
    // of KEDA's polls for good, and a client calling in a loop wrote as many as it called.
    const lines: { msg: string; repeated?: number }[] = [];
    const log = createLogger({}, (line) => lines.push(JSON.parse(line)), "info");
    const replica = new FakeReplica("a");
    const server = new ExternalScalerServer({
      demand: new ModelDemand({ source: replica, log: silentLogger }),
      perReplica: () => undefined,
      log,
      registry: new Registry(),
    });
    const port = await server.listen("127.0.0.1", 0);
    const client = new Client(`127.0.0.1:${port}`, credentials.createInsecure());
    cleanups.push(
      () => server.close(100),
      () => client.close(),
    );
    const isActive = (request: unknown) =>
      new Promise<ServiceError>((resolve) =>
        client.IsActive(request, (error: ServiceError) => resolve(error)),
      );
    for (let i = 0; i < 50; i++)
      expect((await isActive(ref({ model: "missing" }))).code).toBe(status.NOT_FOUND);
    expect(lines.filter((l) => l.msg === "refused a KEDA request")).toHaveLength(1);
    // Another refusal is its own line.
    expect((await isActive(ref({ modle: "x" }))).code).toBe(status.INVALID_ARGUMENT);
    expect(lines.filter((l) => l.msg === "refused a KEDA request")).toHaveLength(2);
  });

  it("metadata of thousands of entries is refused with INVALID_ARGUMENT before it is decoded, on every method", async () => {
    // grpc-js decoded the whole map before any handler saw it: 300,000 entries fit in the 4 MB a
    // message may have and took about 0.6-0.8 s of the autoscaler's event loop to decode (its
    // Leases and control plane included), once per call, from anyone who could reach the port.
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 1, 0);
    const { call, client } = await scalerFor(replica);
    // 5,000 make the point (and the client encodes them quickly); 300,000 took the 0.6-0.8 s.
    const many = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`k${i}`, "1"]));
    const flood = { name: "qwen-scaler", namespace: "ml", scalerMetadata: many };
    const refused = {
      code: status.INVALID_ARGUMENT,
      details: expect.stringContaining("scalerMetadata: 5000 entries, more than 64"),
    };
    await expect(call("IsActive", flood)).rejects.toMatchObject(refused);
    await expect(call("GetMetricSpec", flood)).rejects.toMatchObject(refused);
    await expect(
      call("GetMetrics", { scaledObjectRef: flood, metricName: demandMetricName }),
    ).rejects.toMatchObject(refused);
    const stream = client.StreamIsActive(flood);
    const [error] = (await once(stream, "error")) as [ServiceError];
    expect(error).toMatchObject(refused);
    // StreamMetricSpec is left to KEDA's fallback (metadata-bound.test.ts: not decoded either).
    const spec = client.StreamMetricSpec(flood);
    const [unanswered] = (await once(spec, "error")) as [ServiceError];
    expect(unanswered.code).toBe(status.UNIMPLEMENTED);
    // A trigger's few keys still work, on the same channel.
    expect(await call("IsActive", ref({ model: "qwen", targetDemand: "2" }))).toEqual({ result: true });
  });

  it("StreamIsActive sends the current result at once and pushes true the moment a request is held", async () => {
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 0, 0);
    const { client } = await scalerFor(replica);
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    cleanups.push(() => stream.cancel());
    const results: { result: boolean; at: number }[] = [];
    stream.on("data", (r: { result: boolean }) => results.push({ ...r, at: Date.now() }));
    stream.on("error", () => {});
    await expect.poll(() => results.map((r) => r.result)).toEqual([false]);
    const heldAt = Date.now();
    replica.lead("ml/qwen", 0, 1, true);
    await expect.poll(() => results.map((r) => r.result), { timeout: 1_000 }).toEqual([false, true]);
    // Pushed on the event, not found by the next tick.
    expect(results[1]!.at - heldAt).toBeLessThan(50);
    // While it stays held, "true" is pushed again (KEDA might have missed one); gone → false.
    await expect.poll(() => results.length, { timeout: 2_000 }).toBeGreaterThanOrEqual(3);
    expect(results[2]!.result).toBe(true);
    replica.lead("ml/qwen", 0, 0);
    await expect.poll(() => results.at(-1)?.result).toBe(false);
  });

  it("idle streams hold no repush timer: only a Model with requests held, or active at zero, arms one", async () => {
    // Each stream had its own 250 ms interval from its start, whatever its Model did: thousands of
    // idle KEDA triggers woke the autoscaler thousands of times a second for nothing.
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 0, 0);
    // The repush timers by their period (min of zeroRepushMs 100 and repushMs 300), live ones only.
    // Counting every Timeout of the process counted the watches' ticks too, which each re-arms after
    // every tick: a count caught between two read low, and the test failed about 1 run in 12.
    const repushTimers = new Set<unknown>();
    const setInterval = globalThis.setInterval;
    const clearInterval = globalThis.clearInterval;
    globalThis.setInterval = ((handler: () => void, ms?: number) => {
      const timer = setInterval(handler, ms);
      if (ms === 100) repushTimers.add(timer);
      return timer;
    }) as typeof globalThis.setInterval;
    globalThis.clearInterval = ((timer?: NodeJS.Timeout) => {
      repushTimers.delete(timer);
      clearInterval(timer);
    }) as typeof globalThis.clearInterval;
    cleanups.push(() => {
      globalThis.setInterval = setInterval;
      globalThis.clearInterval = clearInterval;
    });
    const { client } = await scalerFor(replica);
    const results: boolean[] = [];
    for (let i = 0; i < 20; i++) {
      const stream = client.StreamIsActive(ref({ model: "qwen" }));
      cleanups.push(() => stream.cancel());
      stream.on("data", (r: { result: boolean }) => results.push(r.result));
      stream.on("error", () => {});
    }
    await expect.poll(() => results.length).toBe(20);
    expect(repushTimers.size).toBe(0);
    // Held: every stream arms its repush timer; released: they go again.
    replica.lead("ml/qwen", 0, 1, true);
    await expect.poll(() => repushTimers.size).toBe(20);
    replica.lead("ml/qwen", 0, 0);
    await expect.poll(() => repushTimers.size).toBe(0);
  });

  it("while the Model waits at spec.replicas 0 and is active, true is pushed again until it is scaled", async () => {
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 0, 0, false, 0);
    const { client } = await scalerFor(replica);
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    cleanups.push(() => stream.cancel());
    const results: boolean[] = [];
    stream.on("data", (r: { result: boolean }) => results.push(r.result));
    stream.on("error", () => {});
    await expect.poll(() => results).toEqual([false]);
    // In flight, nothing held (a 409 lost KEDA's first scale): pushed again and again at zero.
    replica.lead("ml/qwen", 1, 0, true, 0);
    await expect.poll(() => results.length, { timeout: 2_000 }).toBeGreaterThanOrEqual(4);
    expect(results.slice(1).every(Boolean)).toBe(true);
    // Scaled to 1: no more repeats while nothing is held.
    replica.lead("ml/qwen", 1, 0, false, 1);
    await sleep(200);
    const settled = results.length;
    await sleep(500);
    expect(results.length).toBe(settled);
  });

  it("to a client that stops reading, a stream holds at most a buffer's worth of results; when it reads again the last one is the latest", async () => {
    // Every push was written whatever the client took: one whose HTTP/2 window stayed shut (it
    // stopped reading, and still answered pings) made the server buffer every repush, 4 a second
    // per stream at zero, without bound. An HTTP/2 client that opens with a window of 0 is one.
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 1, 0, false, 0); // active at zero: "true" again every zeroRepushMs
    const { port, registry } = await scalerFor(replica, undefined, { zeroRepushMs: 10 });
    const session = connectHttp2(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: 0 } });
    cleanups.push(() => session.destroy());
    const method = Client.service.StreamIsActive;
    const message = method.requestSerialize(ref({ model: "qwen" })) as Buffer;
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
    frame.writeUInt32BE(message.length, 1);
    const stream = session.request({
      ":method": "POST",
      ":path": method.path,
      "content-type": "application/grpc",
      te: "trailers",
    });
    stream.end(frame);
    let bytes = Buffer.alloc(0);
    stream.on("data", (chunk: Buffer) => {
      bytes = Buffer.concat([bytes, chunk]);
    });
    const results = () => {
      const out: boolean[] = [];
      for (let at = 0; at + 5 <= bytes.length; ) {
        const length = bytes.readUInt32BE(at + 1);
        if (at + 5 + length > bytes.length) break;
        out.push(
          (method.responseDeserialize(bytes.subarray(at + 5, at + 5 + length)) as { result: boolean }).result,
        );
        at += 5 + length;
      }
      return out;
    };
    const pushed = async () =>
      (await registry.getSingleMetric("snooze_external_scaler_pushes_total")!.get()).values.reduce(
        (sum, v) => sum + v.value,
        0,
      );
    // Pushed every 10 ms (zeroRepushMs), none of it delivered.
    await expect.poll(pushed, { timeout: 10_000 }).toBeGreaterThanOrEqual(60);
    expect(bytes.length).toBe(0);
    // Nothing wanted any more: "false", and no repush after it.
    const before = await pushed();
    replica.lead("ml/qwen", 0, 0, false, 0);
    await expect.poll(pushed).toBeGreaterThan(before);
    session.settings({ initialWindowSize: 65_535 });
    await expect.poll(() => results().at(-1), { timeout: 5_000 }).toBe(false);
    // A buffer's worth (grpc-js's 16 messages) and the latest; before, every push since it stopped.
    expect(results().length).toBeLessThanOrEqual(18);
  });

  it("a stream whose connection goes silent (KEDA's node lost, a partition) is ended by the server's keepalive", async () => {
    // Without pings nothing was ever written to an inactive stream, so the server never learned the
    // peer was gone: its watch, timers and stream stayed for good (found by an outside tester).
    const replica = new FakeReplica("a");
    replica.lead("ml/qwen", 0, 0);
    const relay = new SilentRelay();
    cleanups.push(() => relay.close());
    const { client } = await scalerFor(replica, undefined, {
      keepaliveMs: 200,
      via: (port) => relay.to(port),
    });
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    stream.on("error", () => {});
    const results: boolean[] = [];
    stream.on("data", (r: { result: boolean }) => results.push(r.result));
    await expect.poll(() => results).toEqual([false]);
    expect(replica.watchers).toBe(1);
    relay.silence();
    await expect.poll(() => replica.watchers, { timeout: 5_000 }).toBe(0);
  });

  it.each([
    [
      { total: 10, perPeer: 3 },
      3,
      "127.0.0.1 has 3 StreamIsActive streams open, the limit per client address",
    ],
    [{ total: 3, perPeer: 5 }, 3, "this autoscaler replica has 3 StreamIsActive streams open, its limit"],
  ])(
    "with limits %j, streams past %i are refused with RESOURCE_EXHAUSTED naming the limit; the open ones go on, and a closed one makes room",
    async (streamLimits, room, message) => {
      // Nothing bounded the streams: each holds a watch and a timer, and 2,000 idle ones took 2.6% of
      // the event loop. A stream past the limit ends at once; KEDA logs it and retries.
      const replica = new FakeReplica("a");
      replica.lead("ml/qwen", 0, 0);
      const { client } = await scalerFor(replica, undefined, { streamLimits });
      const open = () => {
        const stream = client.StreamIsActive(ref({ model: "qwen" }));
        cleanups.push(() => stream.cancel());
        const results: boolean[] = [];
        const ended: { error?: ServiceError } = {};
        stream.on("data", (r: { result: boolean }) => results.push(r.result));
        stream.on("error", (error: ServiceError) => {
          ended.error = error;
        });
        return { stream, results, ended };
      };
      const streams = Array.from({ length: room }, open);
      for (const { results } of streams) await expect.poll(() => results).toEqual([false]);
      const refused = open();
      await expect.poll(() => refused.ended.error?.code).toBe(status.RESOURCE_EXHAUSTED);
      expect(refused.ended.error?.details).toContain(message);
      expect(refused.results).toEqual([]);
      expect(replica.watchers).toBe(room);
      // The open ones still push.
      replica.lead("ml/qwen", 0, 1, true);
      for (const { results } of streams) await expect.poll(() => results.at(-1)).toBe(true);
      // One closed: its place is free again (once the server has seen the cancel).
      streams[0]!.stream.cancel();
      await expect.poll(() => replica.watchers).toBe(room - 1);
      const next = open();
      await expect.poll(() => next.results).toEqual([true]);
      expect(next.ended.error).toBeUndefined();
    },
  );

  it("tells each HTTP/2 connection how many calls it may have in flight: a client's streams plus room for KEDA's unary calls", async () => {
    const { port } = await scalerFor(new FakeReplica("a"), undefined, {
      streamLimits: { total: 10, perPeer: 4 },
    });
    const session = connectHttp2(`http://127.0.0.1:${port}`);
    cleanups.push(() => session.close());
    const [settings] = (await once(session, "remoteSettings")) as [{ maxConcurrentStreams?: number }];
    expect(settings.maxConcurrentStreams).toBe(4 + 1_024);
  });

  it("StreamIsActive on an unknown Model ends with NOT_FOUND", async () => {
    const { client } = await scalerFor(new FakeReplica("a"));
    const stream = client.StreamIsActive(ref({ model: "missing" }));
    const [error] = (await once(stream, "error")) as [ServiceError];
    expect(error.code).toBe(status.NOT_FOUND);
    expect(error.details).toContain("scalerMetadata.model");
  });
});

describe("a replica that does not lead the Model", () => {
  it("asks the leader, and streams from it: pushes still arrive at once", async () => {
    const leader = new FakeReplica("leader");
    leader.lead("ml/qwen", 1, 0);
    const leaderDemand = new ModelDemand({ source: leader, log: silentLogger, tickMs: 100 });
    const { url } = await controlServer(leaderDemand);
    const follower = new FakeReplica("follower");
    follower.follow("ml/qwen", url);
    const { call, client, demand } = await scalerFor(follower);
    expect(
      await call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: demandMetricName }),
    ).toEqual({ metricValues: [{ metricName: demandMetricName, metricValue: 1, metricValueFloat: 1 }] });
    expect(demand.counts.proxied).toBe(1);

    leader.lead("ml/qwen", 0, 0);
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    cleanups.push(() => stream.cancel());
    const results: boolean[] = [];
    stream.on("data", (r: { result: boolean }) => results.push(r.result));
    stream.on("error", () => {});
    await expect.poll(() => results).toEqual([false]);
    const heldAt = Date.now();
    leader.lead("ml/qwen", 0, 1, true);
    await expect.poll(() => results, { timeout: 1_000, interval: 5 }).toEqual([false, true]);
    expect(Date.now() - heldAt).toBeLessThan(200);

    // The Lease moves to the follower: it answers from its own load, the stream stays open.
    follower.lead("ml/qwen", 0, 0);
    await expect.poll(() => results.at(-1), { timeout: 2_000 }).toBe(false);
    follower.lead("ml/qwen", 0, 2, true);
    await expect.poll(() => results.at(-1), { timeout: 1_000 }).toBe(true);
  });

  it("while the leader refuses its watch, a follower's stream asks it again less and less often", async () => {
    // It asked again every 0.2 s whatever the answer: 375 requests a second at the leader from 100
    // streams whose leader refused them (a 401 for a token it does not take), for good.
    const asked: number[] = [];
    const leader = createServer((_req, res) => {
      asked.push(performance.now());
      res.writeHead(401, { "content-type": "application/json" });
      res.end('{"error":"unauthorized"}');
    });
    leader.listen(0, "127.0.0.1");
    await once(leader, "listening");
    cleanups.push(() => {
      leader.closeAllConnections();
      leader.close();
    });
    const follower = new FakeReplica("follower");
    follower.follow("ml/qwen", `http://127.0.0.1:${(leader.address() as AddressInfo).port}`);
    const demand = new ModelDemand({ source: follower, log: silentLogger, retryMs: 100 });
    const { client } = await scalerFor(follower, demand);
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    cleanups.push(() => stream.cancel());
    stream.on("error", () => {});
    await expect.poll(() => asked.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(5);
    const gaps = asked.slice(1, 5).map((at, i) => at - asked[i]!);
    // 100, 200, 400, 800 ms and the requests' own time: each about twice the one before.
    for (let i = 1; i < gaps.length; i++) expect(gaps[i]!).toBeGreaterThan(gaps[i - 1]! * 1.4);
  });

  it("a forwarded ask is answered only by the leader, never passed on again", async () => {
    const replica = new FakeReplica("b");
    replica.follow("ml/qwen", "http://127.0.0.1:1");
    const { url } = await controlServer(new ModelDemand({ source: replica, log: silentLogger }));
    const response = await fetch(`${url}/snooze/v1/demand/ml/qwen`, { headers: { [forwardedHeader]: "a" } });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: string }).error).toContain(
      "no autoscaler leads Model ml/qwen",
    );
    const missing = await fetch(`${url}/snooze/v1/demand/ml/other`);
    expect(missing.status).toBe(404);
    const malformed = await fetch(`${url}/snooze/v1/demand/ml/qw%ZZen`);
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: string }).error).toContain("malformed percent-escape");
  });

  it("a new leader that has not heard from the activators yet says so instead of reporting 0", async () => {
    const replica = new FakeReplica("b");
    replica.models.set("ml/qwen", { leading: true, load: { inFlight: 0, held: 0 }, settling: true });
    const { call, client } = await scalerFor(replica);
    await expect(call("IsActive", ref({ model: "qwen" }))).rejects.toMatchObject({
      code: status.UNAVAILABLE,
      details: expect.stringContaining("just took over"),
    });
    await expect(
      call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: demandMetricName }),
    ).rejects.toMatchObject({ code: status.UNAVAILABLE });
    const stream = client.StreamIsActive(ref({ model: "qwen" }));
    cleanups.push(() => stream.cancel());
    const results: boolean[] = [];
    stream.on("data", (r: { result: boolean }) => results.push(r.result));
    stream.on("error", () => {});
    await sleep(300);
    expect(results).toEqual([]);
    // Told of a held request (a demand poke): that much is certain, and pushed at once.
    replica.models.set("ml/qwen", { leading: true, load: { inFlight: 0, held: 1 }, settling: true });
    await expect(call("IsActive", ref({ model: "qwen" }))).resolves.toEqual({ result: true });
    await expect(
      call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: demandMetricName }),
    ).rejects.toMatchObject({ code: status.UNAVAILABLE });
    await expect.poll(() => results).toEqual([true]);
    // The activators' stats arrive: the whole count.
    replica.lead("ml/qwen", 3, 1);
    await expect(
      call("GetMetrics", { scaledObjectRef: ref({ model: "qwen" }), metricName: demandMetricName }),
    ).resolves.toMatchObject({ metricValues: [expect.objectContaining({ metricValue: 4 })] });
  });

  it("with no leader known, unary calls fail UNAVAILABLE (KEDA retries) and the stream waits", async () => {
    const replica = new FakeReplica("b");
    replica.follow("ml/qwen");
    const { call } = await scalerFor(replica);
    await expect(call("IsActive", ref({ model: "qwen" }))).rejects.toMatchObject({
      code: status.UNAVAILABLE,
    });
  });
});
