import { expect, test } from "vitest";
import { chat, metricValue, simCommand, until } from "../helpers/local-snooze.ts";
import { gone, serveRuns } from "../support/serve-runs.ts";

// snooze_held_requests and snooze_in_flight_requests say what the admin API says, at any moment a
// scraper asks: not what the last report to the control plane said (a real `snooze serve`, whose
// activator reports every second).

const runs = serveRuns();

test("a burst held, then one in flight: the gauges say 5 as the admin API does, then 0", async () => {
  const run = runs.start(
    `models:\n  m:\n    command: ${simCommand(["--load-time", "1500ms", "--itl", "100ms"], 1)}\n`,
  );
  const url = await run.url;
  const said = async () => {
    const admin = (
      (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
        models: { held: number; inFlight: number }[];
      }
    ).models[0]!;
    const metrics = await (await fetch(`${url}/metrics`)).text();
    return {
      admin: { held: admin.held, inFlight: admin.inFlight },
      metric: {
        held: metricValue(metrics, "snooze_held_requests", { model: "m" }),
        inFlight: metricValue(metrics, "snooze_in_flight_requests", { model: "m" }),
      },
    };
  };
  const burst = () =>
    Array.from({ length: 5 }, () =>
      fetch(`${url}/v1/chat/completions`, chat("m", { stream: true, max_tokens: 20 })).then((r) => r.text()),
    );
  const held = burst();
  await until(async () => (await said()).admin.held === 5, 5_000, "5 held");
  expect((await said()).metric).toEqual({ held: 5, inFlight: 0 });
  for (const text of await Promise.all(held)) expect(text).toContain("[DONE]");
  await until(async () => (await said()).admin.inFlight === 0, 5_000, "the held ones done");
  // On a ready model each request is dispatched as it arrives.
  const streams = burst();
  await until(async () => (await said()).admin.inFlight === 5, 5_000, "5 in flight");
  // Before: 1 here (the report when the model's load began), until the next report a second later.
  expect((await said()).metric).toEqual({ held: 0, inFlight: 5 });
  for (const text of await Promise.all(streams)) expect(text).toContain("[DONE]");
  await until(async () => (await said()).admin.inFlight === 0, 5_000, "all done");
  expect((await said()).metric).toEqual({ held: 0, inFlight: 0 });
  run.child.kill("SIGTERM");
  expect(await run.exited).toBe(0);
  for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
});
