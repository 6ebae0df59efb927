import { writeFileSync } from "node:fs";
import { expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { tiers } from "../../lib/replica-event.ts";
import { chat, metricValue, simCommand, until } from "../helpers/local-snooze.ts";
import { gone, serveRuns } from "../support/serve-runs.ts";

// The model's tier as an operator reads it, from a real `snooze serve`: the admin API, the OpenAI
// listing and /metrics say one tier, the control plane's.

const runs = serveRuns();

/** The model's tier in /snooze/v1/models, in /v1/models and in snooze_replica_tier (those at 1). */
async function tiersSaid(url: string, id: string) {
  const admin = (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
    models: { id: string; tier: string }[];
  };
  const listing = (await (await fetch(`${url}/v1/models`)).json()) as {
    data: { id: string; snooze: { tier: string } }[];
  };
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return {
    admin: admin.models.find((m) => m.id === id)?.tier,
    listing: listing.data.find((m) => m.id === id)?.snooze.tier,
    metric: tiers.filter((tier) => metricValue(metrics, "snooze_replica_tier", { model: id, tier }) === 1),
  };
}

test("a renamed model's start waiting for its fixed port is `starting` in the admin API, the listing and snooze_replica_tier", async () => {
  // Before: `cold` in all three while the start waited (the control plane's own summary said
  // `starting`); then, with the gauge read from that summary, the admin API alone said `cold`.
  const port = await freePort();
  const before = `\nmodels:\n  b:\n    port: ${port}\n    command: ${simCommand(["--load-time", "200ms", "--itl", "50ms"], 1)}\n`;
  const run = runs.start(before);
  const url = await run.url;
  expect((await fetch(`${url}/v1/chat/completions`, chat("b", { max_tokens: 1 }))).status).toBe(200);
  const streaming = fetch(`${url}/v1/chat/completions`, chat("b", { stream: true, max_tokens: 40 })).then(
    (r) => r.text(),
  );
  await until(async () => (await tiersSaid(url, "b")).metric.join() === "ready", 5_000, "b ready");
  writeFileSync(run.config, before.replace("  b:", "  bb:"));
  run.child.kill("SIGHUP");
  await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
  expect(await tiersSaid(url, "bb")).toEqual({ admin: "cold", listing: "cold", metric: ["cold"] });
  const renamed = fetch(`${url}/v1/chat/completions`, chat("bb")).then((r) => r.status);
  await until(
    () => run.stderr().includes("waiting for the engine that holds the model's port to stop"),
    5_000,
    "bb waiting for the port",
  );
  expect(await tiersSaid(url, "bb")).toEqual({
    admin: "starting",
    listing: "starting",
    metric: ["starting"],
  });
  expect(await renamed).toBe(200);
  expect(await tiersSaid(url, "bb")).toEqual({ admin: "ready", listing: "ready", metric: ["ready"] });
  expect(await streaming).toMatch(/"finish_reason":"(length|stop)"/);
  run.child.kill("SIGTERM");
  expect(await run.exited).toBe(0);
  for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
});
