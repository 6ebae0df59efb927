import { once } from "node:events";
import { createServer } from "node:http";
import {
  type AddressInfo,
  createServer as createNetServer,
  type Server as NetServer,
  type Socket,
} from "node:net";
import { expect, test } from "vitest";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import { parseConfig } from "../lib/settings/index.ts";
import { waitFor } from "../test/sim/helpers.ts";
import { firstWave, ModelRoute, releaseWave, spareLimit, unmeasuredMs } from "./model-route.ts";

const config = parseConfig("models:\n  qwen:\n    command: [x, '${PORT}']\n").models.get("qwen")!;
const listener = { demand() {}, loadChanged() {} };

test("progress lines: an estimate when the activation has one, the time waited when not", () => {
  const route = new ModelRoute(config, listener);
  const since = performance.now() - 3_000;
  expect(route.progress(since)).toMatch(/^waiting for qwen, 3(\.\d)?s so far$/);
  route.apply({ model: "qwen", replica: "qwen-1", tier: "starting", since: Date.now() });
  expect(route.progress(since)).toMatch(/^starting qwen, 3(\.\d)?s so far$/);
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "waking",
    since: Date.now(),
    estimateMs: 2_000,
  });
  expect(route.progress(since)).toMatch(/^waking qwen, ~(2|1\.\d)s$/);
  void route.close();
});

test("a model's tier is its most awake replica's, whatever order the events came in", async () => {
  const route = new ModelRoute(config, listener);
  const event = (replica: string, tier: "waking" | "asleep-1" | "ready" | "cold", port: number) =>
    route.apply({ model: "qwen", replica, address: `127.0.0.1:${port}`, tier, since: Date.now() });
  event("qwen-1", "waking", 1);
  event("qwen-2", "asleep-1", 2);
  expect(route.tier).toBe("waking");
  event("qwen-3", "ready", 3);
  expect(route.tier).toBe("ready");
  event("qwen-3", "cold", 3);
  event("qwen-1", "cold", 1);
  expect(route.tier).toBe("asleep-1");
  await route.close();
});

test("held requests leave in waves a turn apart, the first of one request, doubling up to releaseWave, in arrival order; newcomers queue behind them", async () => {
  const route = new ModelRoute(config, listener);
  const release = async () => {
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier: "waking",
      since: Date.now(),
    });
    const order: number[] = [];
    const count = 1 + 2 + 4 + 8 + 2 * releaseWave + 3;
    const held = Array.from({ length: count }, (_, i) => {
      const hold = route.hold();
      void hold.promise.then((backend) => {
        order.push(i);
        route.release(backend);
      });
      return hold;
    });
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier: "ready",
      since: Date.now(),
    });
    // Within this turn (microtasks and ticks included) only the first request went.
    await new Promise((resolve) => process.nextTick(resolve));
    expect(order).toEqual([0]);
    // A request arriving now does not overtake the ones still held.
    expect(route.tryAcquire()).toBeUndefined();
    const waves = [order.length];
    while (order.length < count) {
      await new Promise((resolve) => setImmediate(resolve));
      waves.push(order.length - waves.reduce((a, b) => a + b, 0));
    }
    expect(waves).toEqual([firstWave, 2, 4, 8, releaseWave, releaseWave, 3]);
    expect(order).toEqual(held.map((_, i) => i));
    expect(route.held).toBe(0);
  };
  await release();
  // The next release starts with one request again.
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "asleep-1",
    since: Date.now(),
  });
  await release();
  expect(route.tryAcquire()).toBeDefined();
  await route.close(true);
});

test("while a replica wakes, connections are opened for the held requests; the release uses them and closes the rest", async () => {
  const accepted: Socket[] = [];
  const engine = createServer((req, res) => res.end(req.url));
  engine.on("connection", (socket) => accepted.push(socket));
  engine.listen(0, "127.0.0.1");
  await once(engine, "listening");
  const address = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const route = new ModelRoute(config, listener);
  const event = (tier: "waking" | "ready" | "asleep-1") =>
    route.apply({ model: "qwen", replica: "qwen-1", address, tier, since: Date.now() });
  try {
    // Asleep: nothing is opened for a held request.
    event("asleep-1");
    const early = route.hold();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(accepted.length).toBe(0);
    // Waking: one per held request, and one more for each request held meanwhile.
    event("waking");
    await waitFor(() => accepted.length === 1);
    const later = [route.hold(), route.hold()];
    await waitFor(() => accepted.length === 3);
    // A failed wake (back to asleep) closes them.
    event("asleep-1");
    await waitFor(() => accepted.every((socket) => socket.destroyed));
    event("waking");
    await waitFor(() => accepted.length === 6);
    const gone = route.hold();
    gone.promise.catch(() => {});
    await waitFor(() => accepted.length === 7);
    gone.cancel();
    // Ready: the three held requests go out on connections opened meanwhile; the fourth is closed.
    event("ready");
    const answers = await Promise.all(
      [early, ...later].map(async (hold, i) => {
        const backend = await hold.promise;
        const answer = await backend.pool.request({ method: "GET", path: `/${i}` });
        route.release(backend);
        return answer.body.text();
      }),
    );
    expect(answers).toEqual(["/0", "/1", "/2"]);
    expect(accepted.length).toBe(7);
    await waitFor(() => accepted.filter((socket) => socket.destroyed).length === 4);
    // Never more than spareLimit, however many are held.
    event("asleep-1");
    const many = Array.from({ length: spareLimit + 10 }, () => route.hold());
    event("waking");
    await waitFor(() => accepted.length === 7 + spareLimit);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(accepted.length).toBe(7 + spareLimit);
    for (const hold of many) {
      hold.promise.catch(() => {});
      hold.cancel();
    }
  } finally {
    await route.close(true);
    engine.closeAllConnections();
    await new Promise((resolve) => engine.close(resolve));
  }
});

test("a replica a request could not reach is probed, not left unroutable until a tier report that may never come", async () => {
  const engine = createServer((_req, res) => res.end("ok"));
  engine.listen(0, "127.0.0.1");
  await once(engine, "listening");
  const address = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const asked: (string | undefined)[] = [];
  // A control plane that re-checked the engine, found it well and so reports nothing.
  const route = new ModelRoute(config, {
    demand: (_id, unreachable) => asked.push(unreachable),
    loadChanged() {},
  });
  try {
    route.apply({ model: "qwen", replica: "qwen-1", address, tier: "ready", since: Date.now() });
    const backend = route.tryAcquire()!;
    route.release(backend);
    route.markUnreachable(backend);
    expect(asked).toEqual(["qwen-1"]);
    expect(route.tryAcquire()).toBeUndefined();
    // A request held meanwhile goes to the same replica once the probe connected, with no event.
    const held = route.hold();
    expect((await held.promise).replica).toBe("qwen-1");
    expect(route.inFlight).toBe(1);

    // Nothing listens there any more: the probe fails and the replica stays unroutable, for the
    // control plane to replace; the next request held probes again.
    engine.closeAllConnections();
    await new Promise((resolve) => engine.close(resolve));
    route.release(backend);
    route.markUnreachable(backend);
    const waiting = route.hold();
    let served = false;
    void waiting.promise.then(
      () => (served = true),
      () => {},
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(served).toBe(false);
    expect(route.tryAcquire()).toBeUndefined();
    waiting.cancel();
  } finally {
    await route.close(true);
    if (engine.listening) engine.close();
  }
});

test("a replica whose engine still takes connections but does not answer (on its way down) stays unroutable: the probe asks /health", async () => {
  // Found while testing the resend: a dying engine's listening socket outlived it a moment, the
  // probe's connection was accepted, and the request sent again went back to it and failed again.
  const dying = createNetServer((socket) => socket.destroy());
  const { route } = await foundUnreachable(dying);
  try {
    const held = route.hold();
    let served = false;
    void held.promise.then(
      () => (served = true),
      () => {},
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(served).toBe(false);
    // Its replacement, once reported, takes the request.
    const engine = createServer((_req, res) => res.end("ok"));
    engine.listen(0, "127.0.0.1");
    await once(engine, "listening");
    const replacement = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
    route.apply({ model: "qwen", replica: "qwen-2", address: replacement, tier: "ready", since: Date.now() });
    expect((await held.promise).replica).toBe("qwen-2");
    engine.close();
  } finally {
    await route.close(true);
    dying.close();
  }
});

test("the probe of a suspect replica ends within its time, however long the engine keeps it talking", async () => {
  // An engine sending interim answers (103) to /health, each before the last one's headers timeout
  // is over, kept the probe alive forever: the replica stayed unroutable and no probe asked again.
  let stalling = true;
  let hints = 0;
  const engine = createNetServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", () => {
      if (!stalling) {
        socket.end("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        return;
      }
      const hint = () => {
        hints++;
        socket.write("HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n");
      };
      hint();
      const timer = setInterval(hint, 250);
      socket.once("close", () => clearInterval(timer));
    });
  });
  const { route, backend } = await foundUnreachable(engine);
  try {
    const held = route.hold();
    held.promise.catch(() => {});
    // The probe gives up after its time (2 s); the engine answers from then on, and the next
    // request that finds the replica unreachable probes again and gets it back.
    await waitFor(() => hints > 1);
    stalling = false;
    await waitFor(() => backend.probing !== true, 4_000);
    expect(route.tryAcquire()).toBeUndefined();
    route.markUnreachable(backend);
    expect((await held.promise).replica).toBe("qwen-1");
  } finally {
    await route.close(true);
    engine.close();
  }
});

/** A route whose one replica, `qwen-1`, is `engine` (listening on loopback), just found unreachable. */
async function foundUnreachable(engine: NetServer) {
  engine.listen(0, "127.0.0.1");
  await once(engine, "listening");
  const address = `127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const route = new ModelRoute(config, listener);
  route.apply({ model: "qwen", replica: "qwen-1", address, tier: "ready", since: Date.now() });
  const backend = route.tryAcquire()!;
  route.release(backend);
  route.markUnreachable(backend);
  return { route, backend };
}

/** Applies events of the one replica `qwen-1` to `route`: its tier, and anything else the test sets. */
const applyTo =
  (route: ModelRoute) =>
  (tier: Tier, extra: Partial<ReplicaEvent> = {}) =>
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier,
      since: Date.now(),
      ...extra,
    });

test("Retry-After before an activation is announced: the last start's or wake's estimate, not the 1 s floor", async () => {
  // Found by an outside tester: a burst refused (queue_full) in the instant its first request asked
  // for a cold model whose start takes 12 s was told to come back in 1 s.
  const route = new ModelRoute(config, listener);
  // Nothing measured yet: a first start is taken to last unmeasuredMs.start.
  expect(route.retryAfterMs()).toBe(unmeasuredMs.start);
  const apply = applyTo(route);
  const event = (tier: Tier, estimateMs?: number) => apply(tier, estimateMs ? { estimateMs } : {});
  event("starting", 12_000);
  event("ready");
  event("cold");
  expect(route.retryAfterMs()).toBe(12_000);
  event("starting", 12_000);
  event("ready");
  event("asleep-1");
  // No wake measured yet.
  expect(route.retryAfterMs()).toBe(unmeasuredMs.wake);
  event("waking", 3_000);
  event("ready");
  event("asleep-1");
  expect(route.retryAfterMs()).toBe(3_000);
  // Draining: it sleeps next, then a wake; without sleep mode it stops, then a start.
  const draining = () => apply("draining", { endsAt: Date.now() + 60_000 });
  draining();
  expect(route.retryAfterMs()).toBe(3_000);
  route.config.sleep = false;
  draining();
  expect(route.retryAfterMs()).toBe(12_000);
  route.config.sleep = true;
  await route.close();
});

test("a replica seen at a new address (another engine under its name) has every place free once the requests to the old one end", async () => {
  const route = new ModelRoute({ ...config, concurrency: 1 }, listener);
  const ready = (address: string) =>
    route.apply({ model: "qwen", replica: "qwen-1", address, tier: "ready", since: Date.now() });
  ready("127.0.0.1:1");
  const old = route.tryAcquire()!;
  ready("127.0.0.1:2");
  route.release(old);
  expect(route.inFlight).toBe(0);
  expect(route.replicas()).toEqual([expect.objectContaining({ address: "127.0.0.1:2", inFlight: 0 })]);
  expect(route.tryAcquire()?.address).toBe("127.0.0.1:2");
  await route.close(true);
});

test("Retry-After of a ready model whose places are all taken: its measured answer time over the answers under way", async () => {
  const route = new ModelRoute({ ...config, concurrency: 2 }, listener);
  applyTo(route)("ready");
  // Nothing measured yet: the floor.
  const first = route.tryAcquire()!;
  expect(route.retryAfterMs()).toBe(1_000);
  route.completed(6_000);
  route.completed(10_000);
  // One place taken: one answer of 8 s to wait for.
  expect(route.retryAfterMs()).toBe(8_000);
  // Both: one of the two ends in about half that.
  const second = route.tryAcquire()!;
  expect(route.tryAcquire()).toBeUndefined();
  expect(route.retryAfterMs()).toBe(4_000);
  route.release(first);
  route.release(second);
  // None under way: nothing to wait for but the floor.
  expect(route.retryAfterMs()).toBe(1_000);
  await route.close();
});

test("Retry-After during a model's first start, nothing measured: not the 1 s floor, and at least as long again as it has run", async () => {
  // Found by an outside tester: requests refused (queue_full) during a first start of 4.4 s were told
  // `Retry-After: 1`, and the openai client's two retries were spent within 2 s.
  const route = new ModelRoute(config, listener);
  const starting = (ranMs: number, tier: Tier = "starting") =>
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier,
      since: Date.now() - ranMs,
    });
  // Within a few milliseconds: the clock moves between the event and the question.
  const near = (ms: number) => {
    const told = route.retryAfterMs();
    expect(told).toBeLessThanOrEqual(ms);
    expect(told).toBeGreaterThan(ms - 100);
  };
  starting(0);
  near(unmeasuredMs.start);
  starting(4_000);
  near(unmeasuredMs.start - 4_000);
  starting(30_000);
  expect(route.retryAfterMs()).toBeGreaterThanOrEqual(30_000);
  starting(0, "waking");
  near(unmeasuredMs.wake);
  await route.close();
});

test("Retry-After during a start past its measured estimate: at least as long again as it has run, not the 1 s floor", async () => {
  // Found by an outside tester: a start measured at 1.2 s that now took 12 s (a reload's slower
  // command) told every refused request `Retry-After: 1` after its first 1.2 s.
  const route = new ModelRoute(config, listener);
  const starting = (ranMs: number) =>
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier: "starting",
      since: Date.now() - ranMs,
      estimateMs: 1_200,
    });
  starting(0);
  expect(route.retryAfterMs()).toBeLessThanOrEqual(1_200);
  expect(route.retryAfterMs()).toBeGreaterThan(1_100);
  starting(6_000);
  expect(route.retryAfterMs()).toBeGreaterThanOrEqual(6_000);
  starting(9_000);
  expect(route.retryAfterMs()).toBeGreaterThanOrEqual(9_000);
  await route.close();
});

test("while the model waits out a back-off longer than the hold budget, a request is answered at once: the failure and the back-off left", async () => {
  // Found by an outside tester: it was held for its whole budget, then told to retry in 1 s.
  const demands: string[] = [];
  const route = new ModelRoute(config, { demand: (model) => demands.push(model), loadChanged() {} });
  const failed = (retryIn: number) =>
    route.apply({
      model: "qwen",
      replica: "qwen-1",
      address: "127.0.0.1:1",
      tier: "cold",
      since: Date.now(),
      error: "start of qwen failed: engine exited (code 1)",
      retryAt: Date.now() + retryIn,
    });
  failed(config.holdBudget + 30_000);
  const refused = route.hold();
  const failure = await refused.promise.catch((f) => f);
  expect(failure).toMatchObject({
    reason: "activation-failed",
    message: "start of qwen failed: engine exited (code 1)",
  });
  expect(failure.retryAfterMs).toBeGreaterThan(config.holdBudget + 29_000);
  expect(demands).toEqual([]);
  // A back-off that ends well within the budget: held, for the model tries again meanwhile.
  failed(config.holdBudget - 2_000);
  const held = route.hold();
  expect(route.held).toBe(1);
  expect(demands).toEqual(["qwen"]);
  held.cancel();
  await held.promise.catch(() => {});
  // One that ends as the budget does (less than a second before), or so late that the start it then
  // tries (its last one took 5 s) cannot end within it: answered at once too (found by a later
  // tester: held, then told to retry in 1 s).
  failed(config.holdBudget);
  expect(await route.hold().promise.catch((f) => f.reason)).toBe("activation-failed");
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "starting",
    since: Date.now(),
    estimateMs: 5_000,
  });
  failed(config.holdBudget - 2_000);
  expect(await route.hold().promise.catch((f) => f.reason)).toBe("activation-failed");
  await route.close();
});

test("the back-off is the model's: the failed replica's own events after it keep it; another replica activating, or the control plane's word, ends it", async () => {
  // On Kubernetes the failed pod's events follow the failure, some still saying starting (found in
  // review and by the e2e suite: the route read the back-off from its last event).
  const route = new ModelRoute(config, listener);
  const retryAt = Date.now() + config.holdBudget + 60_000;
  const event = (replica: string, tier: "cold" | "asleep-1" | "starting" | "ready", extra = {}) =>
    route.apply({ model: "qwen", replica, tier, since: Date.now(), ...extra });
  event("qwen-1", "starting", { address: "127.0.0.1:1" });
  event("qwen/activation", "cold", { error: "start of qwen failed: pod qwen-1 not ready", retryAt });
  event("qwen-1", "starting", { address: "127.0.0.1:1" });
  event("qwen-1", "cold");
  event("qwen-2", "asleep-1", { address: "127.0.0.1:2" });
  expect(route.backoff()).toEqual({ retryAt, error: "start of qwen failed: pod qwen-1 not ready" });
  expect(await route.hold().promise.catch((f) => f.reason)).toBe("activation-failed");
  // The control plane says it is over (a reload changed the engine): held again.
  event("qwen/activation", "asleep-1", { retryAt: Date.now() });
  expect(route.backoff()).toBeUndefined();
  const held = route.hold();
  expect(route.held).toBe(1);
  held.cancel();
  await held.promise.catch(() => {});
  // A new failure; another replica activating meanwhile (a person's wake) lifts it while it does.
  event("qwen/activation", "cold", { error: "wake of qwen failed", retryAt });
  expect(route.backoff()?.error).toBe("wake of qwen failed");
  event("qwen-3", "starting", { address: "127.0.0.1:3" });
  expect(route.backoff()).toBeUndefined();
  event("qwen-3", "cold");
  expect(route.backoff()?.error).toBe("wake of qwen failed");
  // A replica ready ends it.
  event("qwen-2", "ready", { address: "127.0.0.1:2" });
  event("qwen-2", "asleep-1", { address: "127.0.0.1:2" });
  expect(route.backoff()).toBeUndefined();
  await route.close();
});

test("a drain already over when it is told (the engine was found unresponsive) ends the forwards on the replica as the event arrives, not on a timer; one still to come waits for its end", async () => {
  // The control plane stops that engine right after telling: on a timer, the stop's news (its
  // connection closed, its exit) could reach the forward first, and the request was counted and
  // answered as `unreachable` (found by a test made tolerant of it, on a loaded machine).
  const route = new ModelRoute(config, listener);
  const apply = applyTo(route);
  apply("ready");
  const backend = route.tryAcquire()!;
  const ends: boolean[] = [];
  const unregister = route.onDrainEnd(backend, (unresponsive) => ends.push(unresponsive));
  apply("draining", { endsAt: Date.now() + 60_000 });
  expect(ends).toEqual([]);
  apply("draining", { endsAt: Date.now(), unresponsive: true });
  expect(ends).toEqual([true]);
  unregister();
  route.release(backend);
  await route.close();
});

test("a request pinned to a replica waits for that one alone, holds back no other, and is told when it goes", async () => {
  const route = new ModelRoute({ ...config, concurrency: 1 }, listener);
  for (const [replica, port] of [
    ["qwen-1", 1],
    ["qwen-2", 2],
  ] as const)
    route.apply({ model: "qwen", replica, address: `127.0.0.1:${port}`, tier: "ready", since: Date.now() });
  const first = route.tryAcquire("qwen-1")!;
  expect(first.replica).toBe("qwen-1");
  expect(route.tryAcquire("qwen-1")).toBeUndefined();
  expect(route.pinnedTo()).toBeUndefined();
  const pinned = route.hold(false, "qwen-1");
  // Told to the control plane, which wakes the replica if it sleeps.
  expect(route.pinnedTo()).toEqual(["qwen-1"]);
  // qwen-2 has room: a request for any replica goes there, not behind the pinned one.
  const other = route.tryAcquire()!;
  expect(other.replica).toBe("qwen-2");
  route.release(other);
  route.release(first);
  expect((await pinned.promise).replica).toBe("qwen-1");
  expect(route.pinnedTo()).toBeUndefined();
  // Held for it while it stops: refused at once, not at the end of the hold budget.
  const again = route.hold(false, "qwen-1");
  route.apply({ model: "qwen", replica: "qwen-1", tier: "cold", since: Date.now() });
  await expect(again.promise).rejects.toMatchObject({ reason: "replica-gone" });
  await expect(route.hold(false, "qwen-1").promise).rejects.toMatchObject({ reason: "replica-gone" });
  expect(route.held).toBe(0);
  expect(route.tryAcquire()?.replica).toBe("qwen-2");
  await route.close();
});
