import { once } from "node:events";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate as turn } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import {
  type DemandSource,
  type DemandUpdate,
  ModelDemand,
  type ModelLookup,
  mergeUpdates,
} from "./model-demand.ts";

/** The leader of one Model, whose load the test sets. */
class Leader implements DemandSource {
  readonly identity = "leader";
  private readonly models = new Map<string, ModelLookup>();
  private readonly listeners = new Set<(key: string, poke: boolean) => void>();
  lookup(key: string) {
    return this.models.get(key);
  }
  onLoad(listener: (key: string, poke: boolean) => void) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  lead(key: string, inFlight: number, poke = false) {
    this.models.set(key, { leading: true, load: { inFlight, held: 0 } });
    for (const l of this.listeners) l(key, poke);
  }
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("a watch step the watcher has not taken yet, and a newer one", () => {
  const sample = (inFlight: number) => ({ model: "ml/qwen", inFlight }) as DemandUpdate["sample"];
  it("go out as one: the newer sample, and a poke if either was one", () => {
    expect(mergeUpdates({ sample: sample(1), poke: true }, { sample: sample(2), poke: false })).toEqual({
      sample: sample(2),
      poke: true,
    });
    expect(mergeUpdates({ sample: sample(1), poke: false }, { sample: sample(2), poke: false }).poke).toBe(
      false,
    );
  });
});

describe("the leader's ?watch=1 stream", () => {
  it("to a watcher that stops reading, holds at most a buffer's worth; when it reads again it gets the latest state", async () => {
    // The writer wrote every step whatever the watcher took: one that stopped reading made the
    // leader buffer every step since, without bound. Long names make each line about 8 KiB, so
    // the steps are far more than the socket buffers between the two hold.
    const name = "q".repeat(8_000);
    const key = `ml/${name}`;
    const leader = new Leader();
    leader.lead(key, 0);
    // No ticks: only the steps the test makes.
    const demand = new ModelDemand({ source: leader, log: silentLogger, tickMs: 600_000 });
    const watches: ServerResponse[] = [];
    const server = createServer((req, res) => {
      watches.push(res);
      demand.handle(req, res, (req.url ?? "/").split("?")[0]!, true);
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(() => {
      server.closeAllConnections();
      server.close();
    });
    const client = request(
      `http://127.0.0.1:${(server.address() as AddressInfo).port}/snooze/v1/demand/ml/${name}?watch=1`,
    );
    client.end();
    const [response] = (await once(client, "response")) as [IncomingMessage];
    cleanups.push(() => response.destroy());
    expect(response.statusCode).toBe(200);
    response.setEncoding("utf8");
    let text = "";
    response.on("data", (chunk: string) => {
      text += chunk;
    });
    await expect.poll(() => text.includes("\n")).toBe(true);
    response.pause();
    const res = watches[0]!;

    const steps = 6_000; // × 8 KiB: about 48 MiB
    let most = 0;
    for (let i = 1; i <= steps; i++) {
      // A request held halfway: its poke must survive the steps folded after it.
      leader.lead(key, i, i === steps / 2);
      await turn();
      most = Math.max(most, res.writableLength);
    }
    // Its highWaterMark (64 KiB) and the line that crossed it; before, tens of MiB.
    const line = `${JSON.stringify({ sample: await demand.sample(key), poke: false })}\n`.length;
    expect(most).toBeLessThanOrEqual(res.writableHighWaterMark + line);

    // Alive after all: it reads on, and the last line it gets is the last state.
    response.resume();
    const lines = () =>
      text
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as DemandUpdate);
    await expect.poll(() => lines().at(-1)?.sample.inFlight, { timeout: 5_000 }).toBe(steps);
    expect(lines().some((update) => update.poke)).toBe(true);
  }, 60_000);
});
