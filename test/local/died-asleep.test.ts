import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { metricValue, startWith, until } from "../helpers/local-snooze.ts";

/**
 * An engine that died while asleep, its exit not yet seen when a request came: the wake finds
 * nothing listening. That wake never reached an engine, so it is no failed wake: the request is
 * served by a fresh engine, as one that comes once the exit was seen is.
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/**
 * A small engine with vLLM's sleep API. `POST /die` makes it close its port at once and exit (code
 * 3) `exitAfterMs` later, as a vLLM API server does that closes its port and then takes its workers
 * down. Each answer closes its connection, as a sleeper's idle connections are closed once asleep
 * past the keep-alive time (5 s in vLLM's server): the wake opens a new one. Each process appends
 * a line to `<dir>/starts`. With `resetWake`, `/die` closes nothing yet: the wake call that comes next
 * is reset, and the port closed with it (a connection waiting on a port that closes is reset, not
 * refused: what a wake gets under load when it reaches the port just before it closes).
 */
function engineCommand(dir: string, exitAfterMs: number, resetWake = false): string {
  const script = [
    "const fs = require('node:fs');",
    "const [port, dir, exitAfterMs, resetWake] = process.argv.slice(1);",
    "let dying = false;",
    "const die = () => { server.close(); server.closeAllConnections(); console.error('engine core died'); setTimeout(() => process.exit(3), Number(exitAfterMs)); };",
    "fs.appendFileSync(dir + '/starts', 'start\\n');",
    "let sleeping = false;",
    "const json = (res, value) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(value)); };",
    "const close = (res) => res.setHeader('connection', 'close');",
    "const server = require('node:http').createServer((req, res) => {",
    "  const path = req.url.split('?')[0];",
    "  if (dying && req.url === '/wake_up') { req.socket.resetAndDestroy(); return die(); }",
    "  close(res); req.resume(); req.on('end', () => {",
    "    if (path === '/health') return res.end();",
    "    if (path === '/is_sleeping') return json(res, { is_sleeping: sleeping });",
    "    if (path === '/sleep') { sleeping = true; return json(res, {}); }",
    "    if (path === '/wake_up') { sleeping = false; return json(res, {}); }",
    "    if (path === '/die') { res.end(); if (resetWake === 'true') dying = true; else die(); return; }",
    "    if (path === '/v1/completions') return json(res, { choices: [{ index: 0, text: 'ok' }] });",
    "    json(res, { id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'served on ' + port } }] });",
    "  });",
    "}).listen(Number(port), '127.0.0.1');",
  ].join("\n");
  return JSON.stringify([
    process.execPath,
    "-e",
    script,
    "${PORT}",
    dir,
    String(exitAfterMs),
    String(resetWake),
  ]);
}

const starts = (dir: string) => readFileSync(join(dir, "starts"), "utf8").trim().split("\n").length;

// The exit seen within a second of the wake call (it waits that long for it), or not.
test.each([
  ["its exit comes 0.6 s after its port closed", 600, false],
  ["it is still there 3 s after its port closed", 3_000, false],
  ["its port closes as the wake call reaches it (reset, not refused), exit 0.6 s later", 600, true],
  ["its port closes as the wake call reaches it (reset, not refused), exit 3 s later", 3_000, true],
])(
  "a request for a sleeper that died a moment ago is served by a fresh engine, not told the wake failed: %s",
  {
    timeout: 20_000,
  },
  async (_, exitAfterMs, resetWake) => {
    // Found by a probe: a request within a few milliseconds of a sleeping sim's crash got
    // `503 activation_failed` ("wake of qwen failed: engine exited"); one 20 ms later a cold start.
    const dir = mkdtempSync(join(tmpdir(), "snooze-died-asleep-"));
    snooze = await startWith(`
models:
  m:
    sleepAfter: 100ms
    command: ${engineCommand(dir, exitAfterMs, resetWake)}
`);
    const client = new OpenAI({
      baseURL: `${snooze.url}/v1`,
      apiKey: "none",
      maxRetries: 0,
      timeout: 15_000,
    });
    const ask = () =>
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    const controller = snooze.autoscaler.controller("m")!;
    const first = await ask();
    await until(() => controller.tier === "asleep-1", 5_000, "asleep");
    await fetch(`http://${controller.state().address!}/die`, { method: "POST" });

    const answer = await ask();
    expect(answer.choices[0]!.message.content).not.toBe(first.choices[0]!.message.content);
    expect(starts(dir)).toBe(2);
    expect(controller.tier).toBe("ready");
    // The engine left on its own: a crash, told as one, not a failed wake.
    const metrics = await snooze.registry.metrics();
    expect(
      metricValue(metrics, "snooze_activation_duration_seconds_count", { model: "m", outcome: "failed" }),
    ).toBe(0);
    expect(
      metricValue(metrics, "snooze_tier_transitions_total", { model: "m", from: "waking", to: "cold" }),
    ).toBe(1);
    expect(metricValue(metrics, "snooze_replica_tier", { model: "m", tier: "ready" })).toBe(1);
    expect(controller.state().lastError).toBeUndefined();
  },
);
