import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import {
  CLIENT,
  type Collector,
  childrenOf as childrenIn,
  hex,
  names,
  otelEnv,
  SERVER,
  type Span,
  startCollector,
  tree as treeIn,
} from "../support/otel-collector.ts";

// A real OpenTelemetry Collector (test/support/otel-collector.ts) between `snooze serve` and this
// test: the span trees of a cold start and of a swap are asserted on what arrives.

const repo = resolve(import.meta.dirname, "../..");

let collector: Collector;
let spans: Span[] = [];
let snooze: ChildProcess;
let snoozeUrl = "";
let snoozeLog = "";

beforeAll(async () => {
  collector = await startCollector();
  spans = collector.spans;
  const dir = mkdtempSync(join(tmpdir(), "snooze-otelcol-"));
  const gpu = (id: string) =>
    simCommand([
      "--enable-sleep-mode",
      "--gpu-id",
      "0",
      "--gpu-memory",
      "24GiB",
      "--model-memory",
      "16GiB",
      "--gpu-dir",
      join(dir, `gpu-${id}`),
    ]);
  writeFileSync(
    join(dir, "snooze.yaml"),
    `slots:
  gpu0: { minResidency: 0s, swapCooldown: 0s }
models:
  solo:
    command: ${simCommand(["--enable-sleep-mode"])}
  a: { slot: gpu0, command: ${gpu("0")} }
  b: { slot: gpu0, command: ${gpu("0")} }
`,
  );
  snooze = spawn(
    process.execPath,
    [join(repo, "bin/snooze.js"), "serve", "--config", join(dir, "snooze.yaml"), "--port", "0"],
    {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...otelEnv(collector), K_SINK: "" },
    },
  );
  snooze.stdout!.on("data", (chunk) => (snoozeLog += chunk));
  snooze.stderr!.on("data", (chunk) => {
    snoozeLog += chunk;
    for (const line of snoozeLog.split("\n")) {
      if (snoozeUrl || !line.includes('"listening"')) continue;
      const record = JSON.parse(line) as { msg?: string; url?: string };
      if (record.msg === "listening" && record.url) snoozeUrl = record.url;
    }
  });
  await until(() => snoozeUrl !== "", 20_000, "snooze serve to listen");
}, 20 * 60_000);

afterAll(async () => {
  // The spans as collected, for hack/trace-waterfall.ts (docs/tracing.md's picture).
  if (process.env.SNOOZE_TRACE_DUMP)
    writeFileSync(process.env.SNOOZE_TRACE_DUMP, JSON.stringify(spans, null, 1));
  if (snooze && snooze.exitCode === null) {
    snooze.kill("SIGTERM");
    await once(snooze, "exit");
  }
  await collector?.close();
});

/** A request that comes with a caller's trace context, as an instrumented client sends it. */
function traced(model: string, traceId: string, spanId: string) {
  const init = chat(model);
  return { ...init, headers: { ...init.headers, traceparent: `00-${traceId}-${spanId}-01` } };
}

const childrenOf = (span: Span) => childrenIn(spans, span);
const tree = (root: Span) => treeIn(spans, root);

describe("spans through a real OpenTelemetry Collector", () => {
  test("a cold start: the caller's trace continues through the activator; the activation is in it, with start and warm-up", async () => {
    const traceId = hex(32);
    const callerSpan = hex(16);
    const response = await fetch(`${snoozeUrl}/v1/chat/completions`, traced("solo", traceId, callerSpan));
    expect(response.status).toBe(200);
    await response.text();
    await until(
      () => spans.some((s) => s.traceId === traceId && s.kind === SERVER),
      10_000,
      "the request's spans at the receiver",
    );
    await until(
      () => spans.some((s) => s.name === "snooze.activation" && s.attrs["snooze.model"] === "solo"),
      10_000,
    );

    const server = spans.find((s) => s.traceId === traceId && s.kind === SERVER)!;
    expect(server.service).toBe("snooze-serve");
    expect(server.name).toBe("POST /v1/chat/completions");
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.attrs).toMatchObject({
      "http.route": "/v1/chat/completions",
      "http.response.status_code": 200,
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "solo",
    });
    const underServer = childrenOf(server);
    expect(names(underServer)).toEqual(expect.arrayContaining(["chat solo", "snooze.hold"]));
    const client = underServer.find((s) => s.name === "chat solo")!;
    expect(client.kind).toBe(CLIENT);
    expect(client.attrs).toMatchObject({ "gen_ai.request.model": "solo", "http.response.status_code": 200 });
    expect(client.attrs["gen_ai.usage.output_tokens"]).toBeGreaterThan(0);

    const activation = spans.find(
      (s) => s.name === "snooze.activation" && s.attrs["snooze.model"] === "solo",
    )!;
    expect(activation.attrs).toMatchObject({ "snooze.activation": "start", "snooze.from_tier": "cold" });
    // The activation the request waited on is part of the caller's trace, and the hold links to it.
    expect(activation.traceId, tree(server)).toBe(traceId);
    expect(names(childrenOf(activation))).toEqual(["snooze.start", "snooze.warmup"]);
    const hold = underServer.find((s) => s.name === "snooze.hold")!;
    expect(hold.links?.map((l) => l.spanId)).toContain(activation.spanId);
    // Nothing ends before it starts, and the activation ends within the hold.
    expect(BigInt(activation.endTimeUnixNano) <= BigInt(hold.endTimeUnixNano)).toBe(true);
  });

  test("a swap: one snooze.swap span with the incumbent's drain and sleep and the target's activation and wake; the held request links to it", async () => {
    for (const model of ["a", "b"]) {
      const response = await fetch(`${snoozeUrl}/v1/chat/completions`, chat(model));
      expect(response.status).toBe(200);
      await response.text();
    }
    const traceId = hex(32);
    const response = await fetch(`${snoozeUrl}/v1/chat/completions`, traced("a", traceId, hex(16)));
    expect(response.status).toBe(200);
    await response.text();
    const swapOf = () =>
      spans.find(
        (s) =>
          s.name === "snooze.swap" &&
          s.attrs["snooze.swap.to"] === "a" &&
          s.attrs["snooze.swap.from"] === "b",
      );
    await until(
      () => swapOf() !== undefined && spans.some((s) => s.traceId === traceId && s.kind === SERVER),
      10_000,
      "the swap's spans",
    );
    const swap = swapOf()!;
    await until(() => childrenOf(swap).length >= 3, 5_000, "the swap's children");
    expect(names(childrenOf(swap)), tree(swap)).toEqual([
      "snooze.activation",
      "snooze.drain",
      "snooze.sleep",
    ]);
    const activation = childrenOf(swap).find((s) => s.name === "snooze.activation")!;
    expect(activation.attrs).toMatchObject({ "snooze.model": "a", "snooze.activation": "wake" });
    expect(names(childrenOf(activation))).toEqual(["snooze.wake", "snooze.warmup"]);
    const sleep = childrenOf(swap).find((s) => s.name === "snooze.sleep")!;
    expect(sleep.attrs["snooze.model"]).toBe("b");
    // The drain and sleep of the incumbent end before the target's wake begins.
    const wake = childrenOf(activation).find((s) => s.name === "snooze.wake")!;
    expect(BigInt(sleep.endTimeUnixNano) <= BigInt(wake.startTimeUnixNano)).toBe(true);

    const server = spans.find((s) => s.traceId === traceId && s.kind === SERVER)!;
    const hold = childrenOf(server).find((s) => s.name === "snooze.hold")!;
    expect(hold.links?.map((l) => l.spanId)).toEqual(expect.arrayContaining([swap.spanId]));
    expect(childrenOf(server).some((s) => s.name === "chat a" && s.kind === CLIENT)).toBe(true);
  });
});
