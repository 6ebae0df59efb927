import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, test } from "vitest";
import { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, metricValue, simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const tierOf = (model: string) => snooze!.autoscaler.controller(model)!.tier;

describe("held requests that cannot be served", () => {
  test("hold budget spent → 503 with Retry-After and an OpenAI error saying why", async () => {
    snooze = await startWith(`
models:
  slow:
    holdBudget: 300ms
    command: ${simCommand(["--load-time", "3s"], 1)}
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("slow"));
    expect(response.status).toBe(503);
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = (await response.json()) as any;
    expect(body.error).toMatchObject({ type: "service_unavailable_error", code: "hold_budget_exceeded" });
    expect(body.error.message).toContain("slow");
    // The start goes on without the client: the model becomes ready for the next request.
    await until(() => tierOf("slow") === "ready", 8_000, "ready");
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("slow"))).status).toBe(200);
  });

  test("hold budget spent on a ready model that is full: the message says it was busy, not that it did not become ready", async () => {
    // Found by an outside tester: a client holding the only place (concurrency 1) got others told
    // the model "did not become ready".
    snooze = await startWith(`
models:
  one:
    concurrency: 1
    holdBudget: 500ms
    command: ${simCommand(["--itl", "100ms", "--load-time", "100ms"], 1)}
`);
    await snooze.autoscaler.controller("one")!.wakeNow();
    expect(tierOf("one")).toBe("ready");
    const stream = await fetch(`${snooze.url}/v1/chat/completions`, {
      ...chat("one", { stream: true, max_tokens: 12, ignore_eos: true }),
      signal: AbortSignal.timeout(20_000),
    });
    const refused = await fetch(`${snooze.url}/v1/chat/completions`, chat("one"));
    expect(refused.status).toBe(503);
    const { error } = (await refused.json()) as any;
    expect(error.code).toBe("hold_budget_exceeded");
    expect(error.message).toContain("is ready but was busy for the whole hold budget");
    expect(await stream.text()).toContain("[DONE]");
  });

  test("hold budget spent while the model's engine is being stopped, deaf to SIGTERM: Retry-After and the message count the stop grace left, not a wake's 2 s", async () => {
    // Found by an outside tester: `snooze stop` on an engine that ignores SIGTERM waits its stop
    // grace before SIGKILL, and a request held meanwhile was told `retry in about 2s` (the
    // unmeasured wake), to be refused again and again until the engine was gone.
    const deaf = [
      "sh",
      "-c",
      `trap '' TERM; "$0" "$1" sim --served-model-name deaf --port "$2" --time-scale 0.05 --enable-sleep-mode; sleep 30`,
      "${SNOOZE}",
      "${PORT}",
    ];
    const config = parseConfig(
      `models:\n  deaf:\n    holdBudget: 500ms\n    command: ${JSON.stringify(deaf)}\n`,
      "test.yaml",
    );
    const platform = new LocalPlatform(config.models.values(), silentLogger, { stopGraceMs: 6_000 });
    snooze = await startLocalSnooze({ config, log: silentLogger, host: "127.0.0.1", port: 0, platform });
    const controller = snooze.autoscaler.controller("deaf")!;
    await controller.wakeNow();
    const stopped = controller.stopNow();
    const route = snooze.activator.routes.get("deaf")!;
    await until(() => route.latestEvent?.goneBy !== undefined, 5_000, "the stop to begin");
    const refused = await fetch(`${snooze.url}/v1/chat/completions`, chat("deaf"));
    expect(refused.status).toBe(503);
    const retryAfter = Number(refused.headers.get("retry-after"));
    // The grace (6 s) and the output's second, less the half second held and what the stop took.
    expect(retryAfter).toBeGreaterThanOrEqual(5);
    expect(retryAfter).toBeLessThanOrEqual(7);
    const { error } = (await refused.json()) as any;
    expect(error.code).toBe("hold_budget_exceeded");
    expect(error.message).toContain("its engine is being stopped");
    expect(error.message).toContain(`retry in about ${retryAfter}s`);
    expect(await stopped).toBe("done");
    expect(tierOf("deaf")).toBe("cold");
  }, 20_000);

  test("queue full on a ready model whose one place is taken: Retry-After is the measured answer time, not 1 s (the openai client)", async () => {
    // Found by a probe: told `Retry-After: 1` while each answer took seconds, the openai client spent
    // its retries before a place could free.
    snooze = await startWith(`
models:
  one:
    concurrency: 1
    queueDepth: 1
    command: ${simCommand(["--itl", "100ms", "--load-time", "100ms"], 1)}
`);
    await snooze.autoscaler.controller("one")!.wakeNow();
    const route = snooze.activator.routes.get("one")!;
    const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const answer = () =>
      client.chat.completions.create({
        model: "one",
        messages: [{ role: "user", content: "hello" }],
        max_tokens: 25,
        ignore_eos: true,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    // One answer of about 2.5 s measured; another takes the place, a third waits in the queue.
    await answer();
    const busy = [answer(), answer()];
    await until(() => route.inFlight === 1 && route.held === 1, 3_000, "one in flight, one held");
    const refused = await answer().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    const { status, code, type, param, headers } = refused as InstanceType<typeof OpenAI.APIError>;
    expect({ status, code, type, param }).toEqual({
      status: 503,
      code: "queue_full",
      type: "service_unavailable_error",
      param: null,
    });
    expect(Number(headers?.get("retry-after"))).toBeGreaterThanOrEqual(2);
    await Promise.all(busy);
  });

  test("queue full → 503 at once, the queued ones are served", async () => {
    snooze = await startWith(`
models:
  slow:
    queueDepth: 2
    command: ${simCommand(["--load-time", "1s"], 1)}
`);
    const queued = [1, 2].map(() => fetch(`${snooze!.url}/v1/chat/completions`, chat("slow")));
    await until(() => snooze!.activator.routes.get("slow")!.held === 2, 2_000, "two held");
    const rejected = await fetch(`${snooze.url}/v1/chat/completions`, chat("slow"));
    expect(rejected.status).toBe(503);
    expect(rejected.headers.get("retry-after")).toBeTruthy();
    expect(((await rejected.json()) as any).error.code).toBe("queue_full");
    expect((await Promise.all(queued)).map((r) => r.status)).toEqual([200, 200]);
    // One joined the first one's activation; the refused one joined nothing (found by an outside tester).
    const metrics = await snooze.registry.metrics();
    expect(metricValue(metrics, "snooze_coalesced_requests_total", { model: "slow" })).toBe(1);
  });

  /** Model `qwen` served, then asleep at level 1 with `faults` set in its engine. */
  async function asleepWithFaults(
    faults: Record<string, number>,
    settings = "",
  ): Promise<{ running: LocalSnooze; address: string }> {
    const running = await startWith(`
models:
  qwen:
    sleepAfter: 200ms${settings}
    command: ${simCommand(["--enable-sleep-mode"])}
`);
    snooze = running;
    expect((await fetch(`${running.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => tierOf("qwen") === "asleep-1", 5_000, "asleep-1");
    const address = running.autoscaler.controller("qwen")!.state().address!;
    const fault = await fetch(`http://${address}/sim/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(faults),
    });
    expect(fault.ok).toBe(true);
    return { running, address };
  }

  test("a failed wake answers the held requests with the reason; the next request tries again", async () => {
    const { running } = await asleepWithFaults({ wakeFail: 1 });
    const failed = await fetch(`${running.url}/v1/chat/completions`, chat("qwen"));
    expect(failed.status).toBe(503);
    const body = (await failed.json()) as any;
    expect(body.error.code).toBe("activation_failed");
    expect(body.error.message).toMatch(/wake of qwen failed: .*500/);
    expect(tierOf("qwen")).toBe("asleep-1");
    const retried = await fetch(`${running.url}/v1/chat/completions`, chat("qwen"));
    expect(retried.status).toBe(200);
  });

  test("a wake the engine never answers → 503 once wakeTimeout is over; the stuck engine is replaced", async () => {
    const { running, address } = await asleepWithFaults({ wakeHang: 1 }, "\n    wakeTimeout: 1s");
    const started = performance.now();
    const failed = await fetch(`${running.url}/v1/chat/completions`, chat("qwen"));
    // wakeTimeout (1 s), not that plus the 5 s of asking the stuck engine whether it sleeps.
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(failed.status).toBe(503);
    expect(((await failed.json()) as any).error.message).toMatch(
      /wake of qwen failed: .*no answer within 1000ms/,
    );
    expect((await fetch(`${running.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    expect(running.autoscaler.controller("qwen")!.state().address).not.toBe(address);
  });

  test("a start that fails (engine exits) → 503 with the engine's last words", async () => {
    snooze = await startWith(`
models:
  broken:
    command: ["\${SNOOZE}", "sim", "--port", "\${PORT}", "--no-such-flag"]
`);
    // A model never started is cold in the metrics too, not absent.
    expect(
      metricValue(await snooze.registry.metrics(), "snooze_replica_tier", { model: "broken", tier: "cold" }),
    ).toBe(1);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("broken"));
    expect(response.status).toBe(503);
    const body = (await response.json()) as any;
    expect(body.error.code).toBe("activation_failed");
    expect(body.error.message).toMatch(/start of broken failed: .*no-such-flag/);
    // The replica went cold in the metrics too (found by an outside tester: the tier gauge stayed
    // `starting` for ever, and no starting → cold transition was counted).
    const tierMetrics = await snooze.registry.metrics();
    expect(metricValue(tierMetrics, "snooze_replica_tier", { model: "broken", tier: "cold" })).toBe(1);
    expect(metricValue(tierMetrics, "snooze_replica_tier", { model: "broken", tier: "starting" })).toBe(0);
    expect(
      metricValue(tierMetrics, "snooze_tier_transitions_total", {
        model: "broken",
        from: "starting",
        to: "cold",
      }),
    ).toBe(1);
    // Each failure lengthens the back-off, and Retry-After says how long it is (it said 1 s each
    // time, found by an outside tester): the model does not try again before then.
    const retryAfters = [Number(response.headers.get("retry-after"))];
    for (let i = 0; i < 2; i++) {
      const again = await fetch(`${snooze.url}/v1/chat/completions`, chat("broken"));
      expect(again.status).toBe(503);
      await again.text();
      retryAfters.push(Number(again.headers.get("retry-after")));
    }
    expect(retryAfters[0]).toBeGreaterThanOrEqual(1);
    expect(retryAfters[2]).toBeGreaterThanOrEqual(2);
    expect(retryAfters[2]).toBeGreaterThan(retryAfters[0]!);
    const metrics = await snooze.registry.metrics();
    expect(
      metricValue(metrics, "snooze_activation_duration_seconds_count", {
        model: "broken",
        outcome: "failed",
      }),
    ).toBe(3);
  });

  test("a start whose engine cannot even be spawned (E2BIG) → 503 at once with the reason, lastError, back-off", {
    timeout: 15_000,
  }, async () => {
    // Found by an outside tester: `spawn` threw (an argument list the system refuses, a NUL byte),
    // the scale-up was only logged, and the request was held for its whole budget, `snooze wake`
    // for its timeout, with no LAST ERROR in `snooze status`.
    snooze = await startWith(`
models:
  huge:
    holdBudget: 10s
    command: ["\${SNOOZE}", "sim", "--port", "\${PORT}", "--served-model-name", "${"x".repeat(300_000)}"]
`);
    const started = performance.now();
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("huge"));
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(response.status).toBe(503);
    const body = (await response.json()) as any;
    expect(body.error.code).toBe("activation_failed");
    expect(body.error.message).toMatch(/start of huge failed: could not run .*E2BIG/);
    const controller = snooze.autoscaler.controller("huge")!;
    expect(controller.state().lastError).toMatch(/E2BIG/);
    expect(tierOf("huge")).toBe("cold");
    // `snooze wake`'s call ends with the failure, not at its timeout; the second failure backs off.
    const woken = performance.now();
    await controller.wakeNow(10_000);
    expect(performance.now() - woken).toBeLessThan(3_000);
    expect(controller.state().workloadReplicas).toBe(0);
    expect(snooze.activator.routes.get("huge")!.backoff()?.error).toMatch(/E2BIG/);
    const metrics = await snooze.registry.metrics();
    expect(
      metricValue(metrics, "snooze_activation_duration_seconds_count", { model: "huge", outcome: "failed" }),
    ).toBe(2);
  });

  test("during a back-off longer than the hold budget a request is answered at once, with the failure and the back-off left", async () => {
    // Found by an outside tester: it was held for its whole budget, then told `hold_budget_exceeded`
    // with Retry-After: 1 and no word of the failure.
    snooze = await startWith(`
models:
  ghost:
    holdBudget: 1s
    command: ["no-such-engine-binary", "--port", "\${PORT}"]
`);
    // Each failure doubles the back-off: retried as told until a back-off of 2 s or more was set.
    for (let i = 0; i < 8; i++) {
      const answer = await fetch(`${snooze.url}/v1/chat/completions`, chat("ghost"));
      expect(answer.status).toBe(503);
      await answer.text();
      const retryAfter = Number(answer.headers.get("retry-after"));
      if (retryAfter >= 2) break;
      await new Promise((resolve) => setTimeout(resolve, retryAfter * 1_000));
    }
    const failures = async () =>
      metricValue(await snooze!.registry.metrics(), "snooze_activation_duration_seconds_count", {
        model: "ghost",
        outcome: "failed",
      });
    const before = await failures();
    // Now the back-off outlasts the budget: answered at once, without a start being tried.
    const started = performance.now();
    const again = await fetch(`${snooze.url}/v1/chat/completions`, chat("ghost"));
    expect(performance.now() - started).toBeLessThan(900);
    expect(again.status).toBe(503);
    expect(Number(again.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await failures()).toBe(before);
    expect(((await again.json()) as any).error).toMatchObject({
      code: "activation_failed",
      message: expect.stringMatching(/start of ghost failed: .*no-such-engine-binary/),
    });
  });

  test("an engine that keeps dying once ready: its back-off is told (lastError, retryAt), and a request it leaves no time is answered at once", async () => {
    // Found by an outside tester: the back-off grew unseen (no lastError, no retryAt) and each
    // request waited out its whole hold budget for `hold_budget_exceeded`.
    snooze = await startWith(`
models:
  flaky:
    holdBudget: 1s
    command: ${simCommand(["--fault-die-after", "2"])}
`);
    const view = async () =>
      ((await (await fetch(`${snooze!.url}/snooze/v1/models`)).json()) as any).models.find(
        (m: { id: string }) => m.id === "flaky",
      );
    // Each engine answers its warm-up and one request, then exits with code 1.
    for (let i = 0; i < 2; i++) {
      const answer = await fetch(`${snooze.url}/v1/chat/completions`, chat("flaky"));
      expect(answer.status).toBe(200);
      await answer.text();
      await until(async () => (await view()).tier === "cold", 5_000, "the engine gone");
    }
    const told =
      /engine exited \(code 1\).*left on its own 2 times within 5m, so its restarts back off \(1s after this one\)/;
    expect(await view()).toMatchObject({
      lastError: expect.stringMatching(told),
      retryAt: expect.anything(),
    });
    const started = performance.now();
    const refused = await fetch(`${snooze.url}/v1/chat/completions`, chat("flaky"));
    expect(performance.now() - started).toBeLessThan(900);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as any).error).toMatchObject({
      code: "activation_failed",
      message: expect.stringMatching(told),
    });
  });

  test("an engine that dies on its warm-up → 503 with its exit code and last words, not the refused connection", async () => {
    // Found by an outside tester: the answer said `connect ECONNREFUSED`, the exit and its reason
    // only in `snooze logs`.
    const engine = [
      "const port = Number(process.argv[1]);",
      "require('node:http').createServer((req, res) => {",
      "  if (req.url === '/health') return res.end();",
      "  console.error('crash on warmup'); process.exit(7);",
      "}).listen(port, '127.0.0.1');",
    ].join("\n");
    snooze = await startWith(`
models:
  cw:
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("cw"));
    expect(response.status).toBe(503);
    const { error } = (await response.json()) as any;
    expect(error.code).toBe("activation_failed");
    expect(error.message).toMatch(/start of cw failed: engine exited \(code 7\): .*crash on warmup/);
  });

  /** An engine that serves, sleeps and wakes, but exits with `code` on the call to `dieOn`. */
  function engineDyingOn(dieOn: "/sleep" | "/wake_up", code: number): string {
    return [
      "const port = Number(process.argv[1]); let sleeping = false;",
      "const json = (res, body) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(body)); };",
      "require('node:http').createServer((req, res) => {",
      "  const path = req.url.split('?')[0];",
      `  if (path === ${JSON.stringify(dieOn)}) { console.error('crash on ' + path); process.exit(${code}); }`,
      "  if (path === '/health') return res.end();",
      "  if (path === '/is_sleeping') return json(res, { is_sleeping: sleeping });",
      "  if (path === '/sleep') { sleeping = true; return json(res, {}); }",
      "  if (path === '/wake_up') { sleeping = false; return json(res, {}); }",
      "  req.resume(); req.on('end', () => json(res, { choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }] }));",
      "}).listen(port, '127.0.0.1');",
    ].join("\n");
  }

  test("an engine that dies on its wake call → 503 with its exit code and last words, not the cut connection", async () => {
    // Found by an outside tester: "wake of … failed: POST /wake_up: other side closed", while a
    // start whose engine died on its warm-up said the exit.
    snooze = await startWith(`
models:
  dw:
    sleepAfter: 200ms
    command: ${JSON.stringify([process.execPath, "-e", engineDyingOn("/wake_up", 10), "${PORT}"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("dw"))).status).toBe(200);
    await until(() => tierOf("dw") === "asleep-1", 5_000, "asleep-1");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("dw"));
    expect(response.status).toBe(503);
    const { error } = (await response.json()) as any;
    expect(error.code).toBe("activation_failed");
    expect(error.message).toMatch(/wake of dw failed: engine exited \(code 10\): .*crash on \/wake_up/);
  });

  test("an engine that dies on its sleep call: lastError says its exit code and last words", async () => {
    snooze = await startWith(`
models:
  ds:
    sleepAfter: 200ms
    command: ${JSON.stringify([process.execPath, "-e", engineDyingOn("/sleep", 9), "${PORT}"])}
`);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("ds"))).status).toBe(200);
    const controller = snooze.autoscaler.controller("ds")!;
    await until(() => controller.state().lastError !== undefined, 5_000, "a lastError");
    expect(controller.state().lastError).toMatch(
      /^sleep of ds failed: engine exited \(code 9\): .*crash on \/sleep/,
    );
    expect(tierOf("ds")).toBe("cold");
  });

  test("an engine command that does not exist → 503 naming it", async () => {
    snooze = await startWith(`
models:
  ghost:
    command: ["no-such-engine-binary", "--port", "\${PORT}"]
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("ghost"));
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).error.message).toMatch(
      /start of ghost failed: .*no-such-engine-binary.*ENOENT \(no such file, nor a command of that name on PATH\)/,
    );
  });

  test("an engine command given as a relative path that is not there → 503 naming the directory it starts from", async () => {
    // Found by an outside tester: `./engine.sh` beside the settings file, Snooze run from elsewhere,
    // was "no such file, nor a command of that name on PATH", with no word of where it was looked for.
    snooze = await startWith(`
models:
  ghost:
    command: ["./no-such-engine.sh", "--port", "\${PORT}"]
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("ghost"));
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).error.message).toContain(
      `could not run ./no-such-engine.sh: spawn ./no-such-engine.sh ENOENT (no such file in ${process.cwd()}, the directory snooze serve runs in, where a relative path starts; write the path from there, or an absolute one)`,
    );
  });

  test("a whole command line given as the program → 503 saying `command` is a list", async () => {
    // Found by a probe: `command: ["vllm serve Qwen/Qwen3-8B --port ${PORT}"]` was answered with the
    // hint for a relative path (the model's name holds a "/").
    snooze = await startWith(`
models:
  oneline:
    command: ["no-such-engine serve Qwen/Qwen3-8B --port \${PORT}"]
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("oneline"));
    expect(response.status).toBe(503);
    expect(((await response.json()) as any).error.message).toMatch(
      /could not run no-such-engine serve Qwen\/Qwen3-8B --port \d+: spawn .* ENOENT \(the program's name holds spaces: `command` is a list, one word an item, as in \[no-such-engine, serve, Qwen\/Qwen3-8B, \.\.\.\], not one text\)/,
    );
  });

  test("an engine command that is not executable, or a directory → 503 saying so", async () => {
    // Found by an outside tester: "spawn /…/engine.sh EACCES" alone.
    const dir = mkdtempSync(join(tmpdir(), "snooze-noexec-"));
    try {
      const script = join(dir, "engine.sh");
      writeFileSync(script, "#!/bin/sh\n", { mode: 0o644 });
      snooze = await startWith(`
models:
  noexec:
    command: [${JSON.stringify(script)}, "\${PORT}"]
  folder:
    command: [${JSON.stringify(dir)}, "\${PORT}"]
`);
      for (const model of ["noexec", "folder"]) {
        const response = await fetch(`${snooze.url}/v1/chat/completions`, chat(model));
        expect(response.status).toBe(503);
        expect(((await response.json()) as any).error.message).toMatch(
          /could not run .*EACCES \(it is not executable \(chmod \+x\), or it is a directory\)/,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an engine script that is there but whose #! interpreter is not → 503 saying so, not "no such file" (found by an outside tester)', async () => {
    // Before: "ENOENT (no such file, nor a command of that name on PATH)" of a file that was there,
    // a script whose virtualenv had moved, or one saved with Windows line ends (`#!/bin/sh\r`).
    const dir = mkdtempSync(join(tmpdir(), "snooze-shebang-"));
    try {
      const moved = join(dir, "vllm");
      writeFileSync(moved, `#!${join(dir, "gone-venv", "bin", "python3")}\nprint(1)\n`, { mode: 0o755 });
      const crlf = join(dir, "engine.sh");
      writeFileSync(crlf, "#!/bin/sh\r\necho hi\r\n", { mode: 0o755 });
      const absent = join(dir, "absent");
      snooze = await startWith(`
models:
  moved:
    command: [${JSON.stringify(moved)}, serve, "\${PORT}"]
  crlf:
    command: [${JSON.stringify(crlf)}, "\${PORT}"]
  absent:
    command: [${JSON.stringify(absent)}, "\${PORT}"]
`);
      const said = async (model: string) => {
        const response = await fetch(`${snooze!.url}/v1/chat/completions`, chat(model));
        expect(response.status).toBe(503);
        return ((await response.json()) as any).error.message as string;
      };
      expect(await said("moved")).toContain(
        `ENOENT (the file is there, but the interpreter its first line names, ${join(dir, "gone-venv", "bin", "python3")}, is not: a virtualenv moved or made again? Fix its #! line)`,
      );
      expect(await said("crlf")).toContain(
        "ENOENT (the file is there, but its first line, #!/bin/sh, ends in a carriage return (Windows line ends, CRLF)",
      );
      // An absolute path is not looked for on PATH.
      expect(await said("absent")).toMatch(/spawn \S+absent ENOENT \(no such file\)"?$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an engine that fails with a 2 MB line of output: the 503 gives its start and its end, a few KB", async () => {
    // Found by an outside tester: a 20 MB line became a 170 KB reason, in every 503 and in `snooze status`.
    snooze = await startWith(`
models:
  spam:
    command: ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\\\0' x >&2; echo ' final words' >&2; exit 1", "\${PORT}"]
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("spam"));
    expect(response.status).toBe(503);
    const { message } = ((await response.json()) as any).error;
    expect(message).toMatch(/start of spam failed: engine exited \(code 1\): x+…x+.* final words$/);
    expect(message.length).toBeLessThan(8_000);
  });

  /** Runs `body` while another process (this one) listens on a port: what it saw is kept. */
  async function withSquatter(body: (port: number, saw: string[]) => Promise<void>): Promise<void> {
    const saw: string[] = [];
    const squatter = createServer((req, res) => {
      saw.push(`${req.method} ${req.url}`);
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"choices":[{"text":"not the engine"}],"is_sleeping":false}');
    });
    squatter.listen(0, "127.0.0.1");
    await once(squatter, "listening");
    try {
      await body((squatter.address() as AddressInfo).port, saw);
    } finally {
      squatter.closeAllConnections();
      squatter.close();
    }
  }

  async function expectPortRefused(response: Response, port: number): Promise<void> {
    expect(response.status).toBe(503);
    const { error } = (await response.json()) as any;
    expect(error.code).toBe("activation_failed");
    expect(error.message).toContain(
      `port ${port} (the model's fixed \`port\`) was in use by another process`,
    );
  }

  test("a fixed port another process listens on → 503 saying so; that process never gets the model's requests", async () => {
    await withSquatter(async (port, saw) => {
      snooze = await startWith(`
models:
  fixed:
    port: ${port}
    holdBudget: 10s
    command: ${simCommand()}
`);
      await expectPortRefused(await fetch(`${snooze.url}/v1/chat/completions`, chat("fixed")), port);
      expect(saw).toEqual([]);
    });
  });

  test("a fixed port in use, and an engine that neither binds nor exits (a wrapper that waits): 503 at once, saying so", async () => {
    // Found by an outside tester: the reason was logged at once, yet the request waited for
    // startTimeout and was told only that the engine was not ready in time.
    await withSquatter(async (port) => {
      snooze = await startWith(`
models:
  wrapped:
    port: ${port}
    startTimeout: 30s
    command: [sh, -c, "sleep 1000", "\${PORT}"]
`);
      const started = performance.now();
      const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("wrapped"));
      expect(performance.now() - started).toBeLessThan(10_000);
      await expectPortRefused(response, port);
    });
  });
});
