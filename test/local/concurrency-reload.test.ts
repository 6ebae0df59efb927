import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, metricValue, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * A reload that changes how many requests a replica takes at once (`concurrency`, `maxConnections`)
 * is taken by the replica running: the route takes every other model setting so (local-mode.md).
 * Found by a probe: raised from 1 to 4, the running replica still took one request at a time, its
 * connection pool made for one, and the requests held behind a long stream waited it out.
 */
let snooze: LocalSnooze | undefined;
let dir: string | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  if (dir) rmSync(dir, { recursive: true, force: true });
  snooze = dir = undefined;
});

const yaml = (limits: string) => `
models:
  one:
${limits}
    command: ${simCommand(["--load-time", "100ms", "--itl", "100ms"], 1)}
`;

describe.each([
  ["concurrency", "    concurrency: 1", "    concurrency: 4"],
  ["maxConnections", "    maxConnections: 1", "    maxConnections: 4"],
])("%s raised by a reload", (_, before, after) => {
  test("the running replica takes the held requests at once, and as many at a time from then on", async () => {
    snooze = await startWith(yaml(before));
    await snooze.autoscaler.controller("one")!.wakeNow();
    const route = snooze.activator.routes.get("one")!;
    // A stream of 10 s takes the only place; three requests are held behind it.
    const long = new AbortController();
    const stream = fetch(`${snooze.url}/v1/chat/completions`, {
      ...chat("one", { stream: true, max_tokens: 100, ignore_eos: true }),
      signal: long.signal,
    }).then((r) => r.text());
    await until(() => route.inFlight === 1, 3_000, "the stream in flight");
    const held = [1, 2, 3].map(() =>
      fetch(`${snooze!.url}/v1/chat/completions`, chat("one", { max_tokens: 1 })).then((r) => r.status),
    );
    await until(() => route.held === 3, 3_000, "three held");

    dir = mkdtempSync(join(tmpdir(), "snooze-concurrency-"));
    const file = join(dir, "snooze.yaml");
    writeFileSync(file, yaml(after));
    expect((await snooze.models!.reload(file, "SIGHUP")).result).toBe("applied");
    // Served beside the stream, not after it.
    expect(await Promise.all(held)).toEqual([200, 200, 200]);
    expect(route.inFlight).toBe(1);
    // And four at a time from then on.
    const more = [1, 2, 3].map(() =>
      fetch(`${snooze!.url}/v1/chat/completions`, chat("one", { max_tokens: 20, ignore_eos: true })).then(
        (r) => r.text(),
      ),
    );
    await until(() => route.inFlight === 4, 3_000, "four in flight");
    expect(route.held).toBe(0);
    long.abort();
    await stream.catch(() => {});
    await Promise.all(more);
    await until(() => route.inFlight === 0, 3_000, "none in flight");
    const metrics = await snooze.registry.metrics();
    expect(metricValue(metrics, "snooze_held_requests", { model: "one" })).toBe(0);
    expect(metricValue(metrics, "snooze_in_flight_requests", { model: "one" })).toBe(0);
  });
});
