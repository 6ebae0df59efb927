import { expect, test } from "vitest";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import { lintExposition } from "../support/promlint.ts";
import { gone, serveRuns } from "../support/serve-runs.ts";

// /metrics of a real `snooze serve` read as Prometheus reads it (its Go text parser and promlint, see
// test/support/promlint.ts) after a run that touches every family: cold starts, a slot swap each way
// (sleep, wake), an engine that resets a connection (the request sent again), a start that fails,
// an unknown model, a sleep on idle. Model and slot names carry what the text format must escape.

const runs = serveRuns();

/** A model id and a slot name with quotes, backslashes, braces, `=` and `,` (no whitespace: ids refuse it). */
const weird = 'we"ird\\name{a="b"},x';
const slot = 'gpu "0"\\';

const yaml = `
slots:
  ${JSON.stringify(slot)}: { minResidency: 0s, swapCooldown: 0s }
models:
  ${JSON.stringify(weird)}:
    aliases: [weird]
    slot: ${JSON.stringify(slot)}
    sleepAfter: 1s
    command: ${simCommand(["--enable-sleep-mode"])}
  other:
    slot: ${JSON.stringify(slot)}
    warmup: false
    command: ${simCommand(["--enable-sleep-mode", "--fault-drop-connection", "1"])}
  broken:
    command: ${simCommand(["--no-such-flag"])}
`;

async function ask(url: string, model: string): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, chat(model, { max_tokens: 2 }));
  await response.arrayBuffer();
  return response.status;
}

test("every snooze_ family parses as Prometheus reads it, passes promlint, and keeps odd names whole", async () => {
  const run = runs.start(yaml);
  const url = await run.url;
  expect(await ask(url, "weird")).toBe(200);
  expect(await ask(url, "other")).toBe(200); // a swap; its first dispatch reset, sent again
  expect(await ask(url, weird)).toBe(200); // a swap back: a wake
  expect(await ask(url, "broken")).toBe(503);
  expect(await ask(url, "no-such-model")).toBe(404);
  await until(
    async () => (await (await fetch(`${url}/metrics`)).text()).includes('to="asleep-1"} 2'),
    10_000,
    "both slot members asleep once",
  );

  // A scraper that prefers OpenMetrics gets the classic text format, said so in Content-Type.
  const response = await fetch(`${url}/metrics`, {
    headers: {
      accept: "application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    },
  });
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  const { families, problems } = await lintExposition(await response.text());

  expect(problems).toEqual([]);
  for (const [name, family] of Object.entries(families)) {
    expect(name).toMatch(/^snooze_[a-z0-9_]+$/);
    expect(family.help, name).not.toBe("");
    if (family.type === "COUNTER") expect(name).toMatch(/_total$/);
  }
  const present = [
    "snooze_activation_duration_seconds",
    "snooze_gpu_seconds_total",
    "snooze_held_requests",
    "snooze_hold_duration_seconds",
    "snooze_in_flight_requests",
    "snooze_replica_tier",
    "snooze_requests_total",
    "snooze_resent_requests_total",
    "snooze_slot_gpu_seconds_total",
    "snooze_slot_resident",
    "snooze_slot_swap_duration_seconds",
    "snooze_slot_swaps_total",
    "snooze_tier_transitions_total",
    "snooze_upstream_errors_total",
    "snooze_upstream_ttfb_seconds",
  ];
  expect(Object.keys(families)).toEqual(expect.arrayContaining(present));
  // Escaped on the way out, whole once parsed: one model, one slot, not a broken line or a new label.
  expect(families.snooze_requests_total!.series).toEqual(
    expect.arrayContaining([
      { model: weird, code: "200" },
      { model: "other", code: "200" },
      { model: "", code: "404" },
    ]),
  );
  expect(families.snooze_slot_resident!.series).toEqual(
    expect.arrayContaining([
      { slot, model: weird },
      { slot, model: "other" },
    ]),
  );
  expect(families.snooze_slot_swaps_total!.series).toEqual(
    expect.arrayContaining([
      { slot, from: weird, to: "other" },
      { slot, from: "other", to: weird },
    ]),
  );
  expect(families.snooze_activation_duration_seconds!.series).toEqual(
    expect.arrayContaining([{ model: "broken", from: "cold", outcome: "failed" }]),
  );

  run.child.kill("SIGTERM");
  expect(await run.exited).toBe(0);
  for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
});
