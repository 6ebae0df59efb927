import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";

// A real OpenTelemetry Collector (core components, built from its Go modules by
// hack/build-otelcol.sh) between `snooze serve` and this test: Snooze exports OTLP to the
// collector as any user's would, the collector batches and posts OTLP/HTTP JSON to a receiver
// here, and the span trees of a cold start and of a swap are asserted on what arrives.

const repo = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** One span as OTLP/JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
  status?: { code?: number };
}

interface Span extends OtlpSpan {
  service: string;
  attrs: Record<string, unknown>;
}

const SERVER = 2;
const CLIENT = 3;

/** The collector binary: built (or found in the cache) by the project's script; never skipped. */
async function collectorBinary(): Promise<string> {
  const script = join(repo, "hack/build-otelcol.sh");
  try {
    const { stdout } = await run(script, ["--print-path"]);
    return stdout.trim();
  } catch {
    // Not built yet: build it now (a cold build takes minutes; .ci/run builds it before the tests).
    try {
      const { stdout } = await run(script, [], { maxBuffer: 64 * 2 ** 20 });
      return stdout.trim().split("\n").at(-1)!;
    } catch (error) {
      throw new Error(
        `hack/build-otelcol.sh could not build the OpenTelemetry Collector this test needs: ${(error as Error).message}`,
      );
    }
  }
}

const spans: Span[] = [];
let receiver: Server;
let collector: ChildProcess;
let snooze: ChildProcess;
let snoozeUrl = "";
let collectorLog = "";
let snoozeLog = "";

function value(v: Record<string, unknown>): unknown {
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  return v;
}

beforeAll(async () => {
  const binary = await collectorBinary();

  // The test's own OTLP/HTTP receiver: the collector's otlphttp exporter posts JSON here.
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      if (req.url === "/v1/traces") {
        const payload = JSON.parse(body.toString("utf8")) as {
          resourceSpans: {
            resource?: { attributes?: { key: string; value: Record<string, unknown> }[] };
            scopeSpans: { spans: OtlpSpan[] }[];
          }[];
        };
        for (const rs of payload.resourceSpans ?? []) {
          const service = String(
            value(rs.resource?.attributes?.find((a) => a.key === "service.name")?.value ?? {}),
          );
          for (const ss of rs.scopeSpans ?? [])
            for (const span of ss.spans ?? [])
              spans.push({
                ...span,
                service,
                attrs: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, value(a.value)])),
              });
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");

  const dir = mkdtempSync(join(tmpdir(), "snooze-otelcol-"));
  const otlpPort = await freePort();
  writeFileSync(
    join(dir, "otelcol.yaml"),
    `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${otlpPort}
processors:
  batch:
    timeout: 100ms
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:${(receiver.address() as AddressInfo).port}
    encoding: json
    compression: none
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlphttp]
`,
  );
  collector = spawn(binary, ["--config", join(dir, "otelcol.yaml")], { stdio: ["ignore", "pipe", "pipe"] });
  collector.stdout!.on("data", (chunk) => (collectorLog += chunk));
  collector.stderr!.on("data", (chunk) => (collectorLog += chunk));
  // Ready once its OTLP/HTTP port answers.
  await until(
    async () =>
      fetch(`http://127.0.0.1:${otlpPort}/v1/traces`, { method: "POST", body: "{}" })
        .then(() => true)
        .catch(() => false),
    20_000,
    `the collector to listen (its log: ${collectorLog})`,
  );

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
      env: {
        ...process.env,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlpPort}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_BSP_SCHEDULE_DELAY: "100",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_LOGS_EXPORTER: "none",
        OTEL_SERVICE_NAME: undefined,
        K_SINK: "",
      },
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
  if (collector && collector.exitCode === null) {
    collector.kill("SIGTERM");
    await once(collector, "exit");
  }
  receiver?.close();
});

/** A request that comes with a caller's trace context, as an instrumented client sends it. */
function traced(model: string, traceId: string, spanId: string) {
  const init = chat(model);
  return { ...init, headers: { ...init.headers, traceparent: `00-${traceId}-${spanId}-01` } };
}

const hex = (n: number) =>
  Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join("");
const childrenOf = (span: Span) => spans.filter((s) => s.parentSpanId === span.spanId);
const names = (list: Span[]) => list.map((s) => s.name).sort();

/** The tree under a span, for a failure message. */
function tree(root: Span, depth = 0): string {
  return [
    `${"  ".repeat(depth)}${root.name} (${root.service})`,
    ...childrenOf(root).map((c) => tree(c, depth + 1)),
  ].join("\n");
}

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
