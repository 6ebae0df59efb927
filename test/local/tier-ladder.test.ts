import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type CloudEvent, HTTP } from "cloudevents";
import { afterEach, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, metricValue, simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const tierOf = (model: string) => snooze!.autoscaler.controller(model)!.tier;
const transitions = async (model: string, from: string, to: string) =>
  metricValue(await snooze!.registry.metrics(), "snooze_tier_transitions_total", { model, from, to });

describe("the tier ladder through the activator", () => {
  test("a request for a cold model starts its engine and is answered", async () => {
    snooze = await startWith(`
models:
  qwen:
    aliases: [q]
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    expect(tierOf("qwen")).toBe("cold");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("q"));
    expect(response.status).toBe(200);
    const body = (await response.json()) as any;
    expect(body.model).toBe("qwen");
    expect(body.choices[0].message.content.length).toBeGreaterThan(0);
    expect(tierOf("qwen")).toBe("ready");
    expect(await transitions("qwen", "cold", "starting")).toBe(1);
  });

  test("idle → asleep; the next request wakes it (no second start)", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 300ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep-1");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(response.status).toBe(200);
    expect(tierOf("qwen")).toBe("ready");
    expect(await transitions("qwen", "asleep-1", "waking")).toBe(1);
    expect(await transitions("qwen", "cold", "starting")).toBe(1);
  });

  test("level 1 → level 2 after deepSleepAfter, then zero after zeroAfter; a level-2 wake reloads weights", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 200ms
    deepSleepAfter: 300ms
    zeroAfter: 1500ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-2", 5_000, "asleep-2");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(response.status).toBe(200);
    expect(await transitions("qwen", "asleep-2", "waking")).toBe(1);
    await until(() => tierOf("qwen") === "cold", 8_000, "cold");
    expect(await transitions("qwen", "asleep-2", "cold")).toBe(1);
  });

  test("an engine without sleep mode goes from ready straight to cold", async () => {
    snooze = await startWith(`
models:
  plain:
    sleep: false
    sleepAfter: 200ms
    command: ${simCommand()}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("plain"))).status).toBe(200);
    await until(() => tierOf("plain") === "cold", 5_000, "cold");
    expect(await transitions("plain", "draining", "cold")).toBe(1);
  });

  test("200 requests to a sleeping model: exactly one wake, all answered, in arrival order", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 200ms
    concurrency: 4
    command: ${simCommand(["--enable-sleep-mode", "--max-num-seqs", "256"], 0.2)}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep-1");
    // 10 waves of 20 connections, 100 ms apart. Within a wave the connections arrive at once and
    // are accepted interleaved over the activator's listening sockets (activator/listen.ts), so
    // arrival order is the order of the waves. (25 ms apart was too close on a loaded machine: the
    // test's own client sent a wave's request after the next waves' ones.)
    const waveOf: number[] = [];
    const finished: number[] = [];
    const requests: Promise<number>[] = [];
    for (let wave = 0; wave < 10; wave++) {
      for (let i = 0; i < 20; i++) {
        const id = waveOf.push(wave) - 1;
        requests.push(
          (async () => {
            const response = await fetch(
              `${snooze!.url}/v1/chat/completions`,
              chat("qwen", { max_tokens: 1 }),
            );
            await response.arrayBuffer();
            finished.push(id);
            return response.status;
          })(),
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const results = await Promise.all(requests);
    expect(results.every((s) => s === 200)).toBe(true);
    expect(await transitions("qwen", "asleep-1", "waking")).toBe(1);
    // Released in arrival order with 4 at a time: no request finishes before one that arrived two
    // waves (200 ms) or more ahead of it.
    let latestWave = 0;
    const overtakes: number[] = [];
    for (const id of finished) {
      if (waveOf[id]! < latestWave - 1) overtakes.push(id);
      latestWave = Math.max(latestWave, waveOf[id]!);
    }
    expect(overtakes).toEqual([]);
  });

  test("a client that leaves during a wake does not abort it; the next request is served warm", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 200ms
    command: ${simCommand(["--enable-sleep-mode", "--wake-time-l1", "4s"], 0.1)}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep-1");
    const leaving = new AbortController();
    const abandoned = fetch(`${snooze.url}/v1/chat/completions`, {
      ...chat("qwen"),
      signal: leaving.signal,
    }).catch((e) => e);
    await until(() => tierOf("qwen") === "waking", 2_000, "waking");
    leaving.abort();
    expect(await abandoned).toBeInstanceOf(Error);
    await until(() => tierOf("qwen") === "ready", 5_000, "ready after the abandoned wake");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(response.status).toBe(200);
    expect(await transitions("qwen", "asleep-1", "waking")).toBe(1);
    const metrics = await snooze.registry.metrics();
    expect(
      metricValue(metrics, "snooze_hold_duration_seconds_count", { model: "qwen", outcome: "abandoned" }),
    ).toBe(1);
  });
});

describe("what the engines saw", () => {
  test("no request ever reaches a sleeping engine: a sleep/wake cycle under steady traffic", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 100ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    // Requests arrive in waves separated by idle gaps, so the model sleeps and wakes several times,
    // with some requests landing exactly while it drains, sleeps or wakes.
    for (let wave = 0; wave < 4; wave++) {
      const statuses = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          new Promise((r) => setTimeout(r, i * 15)).then(
            async () => (await fetch(`${snooze!.url}/v1/chat/completions`, chat("qwen"))).status,
          ),
        ),
      );
      expect(statuses.every((s) => s === 200)).toBe(true);
      await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep");
    }
    const address = snooze.autoscaler.controller("qwen")!.state().address!;
    const state = (await (await fetch(`http://${address}/sim/state`)).json()) as any;
    expect(await transitions("qwen", "asleep-1", "waking")).toBeGreaterThanOrEqual(3);
    expect(state.arrivedWhileAsleep).toBe(0);
  });

  test("a request that arrives while the engine is being put to sleep waits for the wake", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 100ms
    command: ${simCommand(["--enable-sleep-mode", "--load-time", "100ms", "--sleep-time-l1", "1500ms", "--wake-time-l1", "100ms"], 1)}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "draining", 5_000, "draining");
    await new Promise((resolve) => setTimeout(resolve, 300)); // the drain is over; the sleep call runs
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(response.status).toBe(200);
    expect(await transitions("qwen", "asleep-1", "waking")).toBe(1);
    const address = snooze.autoscaler.controller("qwen")!.state().address!;
    expect(((await (await fetch(`http://${address}/sim/state`)).json()) as any).arrivedWhileAsleep).toBe(0);
  });

  test("level 1 → level 2 really discards the weights (vLLM ignores a sleep while asleep)", async () => {
    snooze = await startWith(`
models:
  qwen:
    sleepAfter: 100ms
    deepSleepAfter: 200ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-2", 5_000, "asleep-2");
    const address = snooze.autoscaler.controller("qwen")!.state().address!;
    const state = (await (await fetch(`http://${address}/sim/state`)).json()) as any;
    expect(state).toMatchObject({ isSleeping: true, sleepLevel: 2, weightsValid: false });
  });

  test("past hostMemoryBudget the longest-asleep level-1 sleeper goes to level 2", async () => {
    snooze = await startWith(`
hostMemoryBudget: 20Gi
defaults:
  sleepAfter: 100ms
  hostMemory: 16Gi
models:
  first:
    command: ${simCommand(["--enable-sleep-mode"])}
  second:
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("first"))).status).toBe(200);
    await until(() => tierOf("first") === "asleep-1", 5_000, "first asleep");
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("second"))).status).toBe(200);
    await until(() => tierOf("second") === "asleep-1", 5_000, "second asleep");
    await until(() => tierOf("first") === "asleep-2", 5_000, "first demoted");
    expect(tierOf("second")).toBe("asleep-1");
  });
});

describe("CloudEvents", () => {
  test("tier changes go to the eventSink as binary-mode CloudEvents the SDK reads and validates", async () => {
    const received: any[] = [];
    const sink = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        const event = HTTP.toEvent({ headers: req.headers, body }) as CloudEvent<Record<string, unknown>>;
        event.validate();
        received.push({
          contentType: req.headers["content-type"],
          specversion: req.headers["ce-specversion"],
          event,
        });
        res.writeHead(202).end();
      });
    });
    sink.listen(0, "127.0.0.1");
    await once(sink, "listening");
    try {
      snooze = await startWith(`
eventSink: http://127.0.0.1:${(sink.address() as AddressInfo).port}/
models:
  qwen:
    sleepAfter: 200ms
    command: ${simCommand(["--enable-sleep-mode"])}
`);
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
      await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep");
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
      await until(() => received.length >= 3, 3_000, "three events");
      // Deliveries run side by side, so they may arrive out of order: order them by their time.
      received.sort((a, b) => Date.parse(a.event.time) - Date.parse(b.event.time));
      expect(received.map((r) => r.event.type)).toEqual([
        "dev.snooze.replica.started",
        "dev.snooze.replica.slept",
        "dev.snooze.replica.woke",
      ]);
      expect(received[0].contentType).toBe("application/json");
      expect(received[0].specversion).toBe("1.0");
      expect(received[2].event).toMatchObject({
        specversion: "1.0",
        subject: "qwen",
        data: { model: "qwen", replica: "qwen-1", from: "waking", to: "ready" },
      });
    } finally {
      sink.close();
    }
  });
});
