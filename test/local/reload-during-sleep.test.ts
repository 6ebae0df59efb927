import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import type { ReplicaEvent } from "../../lib/replica-event.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * A reload that changes a model's engine while a sleep of it waits for its drain (found by a
 * probe: the engine, outdated, was still sent its sleep call, moving its weights to host RAM, and
 * was stopped right after it; the sleep's answer said asleep-1 of a model cold a moment later).
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const settings = (loadTime: string) =>
  `models:\n  m:\n    command: ${simCommand(["--enable-sleep-mode", "--itl", "1s", "--load-time", loadTime], 0.05)}\n`;

test("snooze sleep, then a reload changes the engine during the drain: the engine is stopped, not put to sleep first", async () => {
  snooze = await startWith(settings("1s"));
  const { url } = snooze;
  expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
  const events: ReplicaEvent[] = [];
  snooze.autoscaler.watch((event) => events.push(event));
  // About 3 s (60 tokens, 50 ms each): the sleep waits for it to finish.
  const streaming = fetch(`${url}/v1/chat/completions`, chat("m", { stream: true, max_tokens: 60 })).then(
    (r) => r.text(),
  );
  await until(() => snooze!.activator.routes.get("m")!.inFlight === 1, 5_000, "the stream");
  const sleep = fetch(`${url}/snooze/v1/models/m/sleep`, { method: "POST" });
  await until(() => events.some((e) => e.tier === "draining"), 5_000, "the drain");
  expect(snooze.models!.apply(parseConfig(settings("900ms"), "test.yaml")).result).toBe("applied");

  expect(await streaming).toContain("[DONE]");
  const answer = await sleep;
  expect(answer.status).toBe(200);
  expect(await answer.json()).toMatchObject({ model: "m", action: "sleep", tier: "cold" });
  expect(events.map((e) => e.tier)).not.toContain("asleep-1");
  expect(snooze.autoscaler.controller("m")!.tier).toBe("cold");
});
