import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, test } from "vitest";
import type { Logger } from "../log.ts";
import { KubeError, type WatchEvent } from "./client.ts";
import { Informer, type ListWatch } from "./informer.ts";

interface Obj {
  metadata: { name: string; namespace?: string; resourceVersion: string };
  value?: string;
}

const obj = (name: string, rv: number, value = ""): Obj => ({
  metadata: { name, namespace: "ns", resourceVersion: String(rv) },
  value,
});

/**
 * A fake API: a list answer and a script per watch call. Each watch gets a controller the test
 * drives: send events, end the stream, fail it.
 */
class FakeSource implements ListWatch<Obj> {
  items: Obj[] = [];
  resourceVersion = "1";
  listCalls = 0;
  listFailures = 0;
  watchCalls: { from: string; send(e: WatchEvent<Obj>): void; end(): void; fail(e: Error): void }[] = [];
  watchFailures: Error[] = [];
  private watchWaiters: (() => void)[] = [];

  async list() {
    this.listCalls++;
    if (this.listFailures > 0) {
      this.listFailures--;
      throw new KubeError(503, "ServiceUnavailable", "list failed");
    }
    return { items: structuredClone(this.items), resourceVersion: this.resourceVersion };
  }

  watch(from: string, onEvent: (e: WatchEvent<Obj>) => void, signal: AbortSignal): Promise<void> {
    const failure = this.watchFailures.shift();
    if (failure) return Promise.reject(failure);
    return new Promise((resolve, reject) => {
      signal.addEventListener("abort", () => resolve(), { once: true });
      this.watchCalls.push({ from, send: onEvent, end: resolve, fail: reject });
      for (const w of this.watchWaiters.splice(0)) w();
    });
  }

  /** Waits for the n-th watch call (1-based), bounded. */
  async nthWatch(n: number) {
    const deadline = Date.now() + 5_000;
    while (this.watchCalls.length < n) {
      if (Date.now() > deadline) throw new Error(`watch #${n} never came (${this.watchCalls.length})`);
      await new Promise<void>((resolve) => {
        this.watchWaiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
    return this.watchCalls[n - 1]!;
  }
}

function recorder(informer: Informer<Obj>) {
  const seen: string[] = [];
  informer.on({
    add: (o) => seen.push(`add ${o.metadata.name}@${o.metadata.resourceVersion}`),
    update: (o, old) =>
      seen.push(
        o === old ? `resync ${o.metadata.name}` : `update ${o.metadata.name}@${o.metadata.resourceVersion}`,
      ),
    delete: (o) => seen.push(`delete ${o.metadata.name}`),
  });
  return seen;
}

async function until(check: () => boolean, what: string) {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

let informer: Informer<Obj> | undefined;
afterEach(async () => {
  await informer?.stop();
  informer = undefined;
});

describe("Informer", () => {
  test("lists, then watches from the list's resourceVersion and applies events in order", async () => {
    const source = new FakeSource();
    source.items = [obj("a", 1)];
    source.resourceVersion = "5";
    informer = new Informer({ name: "t", source });
    const seen = recorder(informer);
    await informer.start();
    expect(informer.list().map((o) => o.metadata.name)).toEqual(["a"]);
    const w = await source.nthWatch(1);
    expect(w.from).toBe("5");
    w.send({ type: "ADDED", object: obj("b", 6) });
    w.send({ type: "MODIFIED", object: obj("a", 7, "x") });
    w.send({ type: "DELETED", object: obj("b", 8) });
    expect(seen).toEqual(["add a@1", "add b@6", "update a@7", "delete b"]);
    expect(informer.get("ns/a")?.value).toBe("x");
  });

  test("a watch that ends is resumed from the last resourceVersion seen, bookmarks included", async () => {
    const source = new FakeSource();
    informer = new Informer({ name: "t", source });
    await informer.start();
    const first = await source.nthWatch(1);
    first.send({ type: "ADDED", object: obj("a", 3) });
    first.send({ type: "BOOKMARK", object: obj("", 9) });
    first.end();
    const second = await source.nthWatch(2);
    expect(second.from).toBe("9");
    expect(source.listCalls).toBe(1);
  });

  test("410 Gone (an ERROR event or the HTTP status) lists again and delivers the difference", async () => {
    const source = new FakeSource();
    source.items = [obj("a", 1), obj("b", 1)];
    informer = new Informer({ name: "t", source });
    const seen = recorder(informer);
    await informer.start();
    // While the watch was away: b went, a changed, c came.
    source.items = [obj("a", 20, "new"), obj("c", 21)];
    source.resourceVersion = "21";
    (await source.nthWatch(1)).send({ type: "ERROR", object: { code: 410 } as never });
    const second = await source.nthWatch(2);
    expect(second.from).toBe("21");
    expect(source.listCalls).toBe(2);
    expect(seen.slice(2).sort()).toEqual(["add c@21", "delete b", "update a@20"]);
    expect(informer.counts.expired).toBe(1);

    source.watchFailures.push(new KubeError(410, "Expired", "too old"));
    second.end();
    await source.nthWatch(3);
    expect(source.listCalls).toBe(3);
  });

  test("failed lists and watches are retried with back-off, and the first sync still completes", async () => {
    const source = new FakeSource();
    source.listFailures = 2;
    source.items = [obj("a", 1)];
    informer = new Informer({ name: "t", source, backoff: { initialMs: 20, maxMs: 40 } });
    const started = Date.now();
    await informer.start();
    expect(source.listCalls).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2 * 20 * 0.8);
    expect(informer.synced).toBe(true);
    // The running watch breaks, and the next attempt cannot even connect: two more failures.
    source.watchFailures.push(new Error("connection refused"));
    (await source.nthWatch(1)).fail(new Error("reset"));
    await source.nthWatch(2);
    expect(informer.counts.failures).toBe(4);
    expect(source.listCalls).toBe(3);
  });

  test("a watch that got events and then broke is retried from the first back-off, not where an earlier outage left it", async () => {
    const source = new FakeSource();
    source.items = [obj("a", 1)];
    const retries: Record<string, unknown>[] = [];
    const log: Logger = {
      debug() {},
      info() {},
      warn: (msg, fields) => {
        if (msg === "list or watch failed; retrying") retries.push(fields ?? {});
      },
      error() {},
      child: () => log,
    };
    informer = new Informer({ name: "t", source, backoff: { initialMs: 5, maxMs: 1_000 }, log });
    await informer.start();
    // An outage: the running watch is reset and the next three cannot connect.
    source.watchFailures.push(new Error("refused"), new Error("refused"), new Error("refused"));
    (await source.nthWatch(1)).fail(new Error("reset"));
    const back = await source.nthWatch(2);
    expect(retries.map((r) => r.failures)).toEqual([1, 2, 3, 4]);
    // Back: the watch delivers again. Then the next outage resets it.
    back.send({ type: "MODIFIED", object: obj("a", 2) });
    back.fail(new Error("reset"));
    await source.nthWatch(3);
    expect(retries.at(-1)).toMatchObject({ failures: 1, delayMs: 5 });
  });

  test("a watch the server ends at once without an event is retried with back-off, not in a loop", async () => {
    // A server (or a proxy before it) that closes every watch stream at once: each one was resumed
    // at once, a loop of watch requests as fast as it answered them (client-go's reflector backs
    // off from such a "very short watch").
    let watches = 0;
    const at: number[] = [];
    const source: ListWatch<Obj> = {
      list: async () => ({ items: [], resourceVersion: "1" }),
      watch: () => {
        watches++;
        at.push(performance.now());
        return new Promise((resolve) => setImmediate(resolve));
      },
    };
    informer = new Informer({ name: "t", source, backoff: { initialMs: 20, maxMs: 40 } });
    await informer.start();
    await until(() => watches >= 4, "four watches");
    expect(informer.counts.failures).toBeGreaterThanOrEqual(3);
    // Three back-offs (20, 40 and 40 ms, jittered by at most a fifth) lie between the first and the fourth.
    expect(at[3]! - at[0]!).toBeGreaterThanOrEqual((20 + 40 + 40) * 0.8);
  });

  test("a watch that expires again right after its fresh list lists again with back-off, not in a loop", async () => {
    // The first expiry lists again at once (the usual case); expiring again before any event, the
    // list-watch pair made no progress, and looping on it was a full list as fast as the server answered.
    const source = new FakeSource();
    source.items = [obj("a", 1)];
    const at: number[] = [];
    const list = source.list.bind(source);
    source.list = () => {
      at.push(performance.now());
      return list();
    };
    source.watch = () => Promise.reject(new KubeError(410, "Expired", "too old resource version"));
    informer = new Informer({ name: "t", source, backoff: { initialMs: 20, maxMs: 40 } });
    await informer.start();
    await until(() => source.listCalls >= 4, "four lists");
    expect(informer.counts.expired).toBeGreaterThanOrEqual(3);
    expect(informer.counts.failures).toBeGreaterThanOrEqual(2);
    // The second list comes at once; back-offs of 20 and 40 ms (jittered) lie before the third and fourth.
    expect(at[3]! - at[1]!).toBeGreaterThanOrEqual((20 + 40) * 0.8);
    expect(informer.list().map((o) => o.metadata.name)).toEqual(["a"]);
  });

  test("an ERROR event 410 right after a fresh list is an expiry without progress too", async () => {
    const source = new FakeSource();
    informer = new Informer({ name: "t", source, backoff: { initialMs: 20, maxMs: 40 } });
    await informer.start();
    (await source.nthWatch(1)).send({ type: "ERROR", object: { code: 410 } as never });
    (await source.nthWatch(2)).send({ type: "ERROR", object: { code: 410 } as never });
    const third = await source.nthWatch(3);
    expect(source.listCalls).toBe(3);
    expect(informer.counts.failures).toBe(1);
    // A watch that delivers makes progress again: its next expiry lists again at once.
    third.send({ type: "ADDED", object: obj("b", 30) });
    third.send({ type: "ERROR", object: { code: 410 } as never });
    await source.nthWatch(4);
    expect(informer.counts.failures).toBe(1);
  });

  test("a silent watch is restarted by the watchdog", async () => {
    const source = new FakeSource();
    informer = new Informer({ name: "t", source, staleMs: 50 });
    await informer.start();
    const first = await source.nthWatch(1);
    first.send({ type: "ADDED", object: obj("a", 4) });
    const second = await source.nthWatch(2);
    expect(second.from).toBe("4");
    expect(informer.counts.stale).toBeGreaterThanOrEqual(1);
  });

  test("a periodic resync redelivers every cached object", async () => {
    const source = new FakeSource();
    source.items = [obj("a", 1), obj("b", 1)];
    informer = new Informer({ name: "t", source, resyncMs: 30 });
    const seen = recorder(informer);
    await informer.start();
    await until(() => seen.filter((s) => s.startsWith("resync")).length >= 4, "two resyncs");
    expect(seen.filter((s) => s === "resync a").length).toBeGreaterThanOrEqual(2);
  });

  test("stop ends the watch and no handler runs afterwards", async () => {
    const source = new FakeSource();
    informer = new Informer({ name: "t", source });
    const seen = recorder(informer);
    await informer.start();
    const w = await source.nthWatch(1);
    await informer.stop();
    w.send({ type: "ADDED", object: obj("late", 2) });
    expect(seen).toEqual([]);
    informer = undefined;
  });

  test("stop gives up a list the API server never answers, and the wait before a retry", async () => {
    // Found by an outside tester: `snooze webhooks` with an API server that took connections and
    // never answered stopped only when the list timed out, 30 s after a SIGTERM.
    let listSignal: AbortSignal | undefined;
    const hung = new Informer<Obj>({
      name: "t",
      source: {
        list: (signal) => {
          listSignal = signal;
          return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
        },
        watch: () => new Promise(() => {}),
      },
    });
    void hung.start();
    await sleep(10);
    await hung.stop();
    expect(listSignal?.aborted).toBe(true);
    // A list that failed: stop comes during the back-off (an hour here) and ends it.
    const failing = new Informer<Obj>({
      name: "t",
      source: { list: () => Promise.reject(new Error("refused")), watch: () => new Promise(() => {}) },
      backoff: { initialMs: 3_600_000, maxMs: 3_600_000 },
    });
    void failing.start();
    await sleep(10);
    await failing.stop();
  });
});
