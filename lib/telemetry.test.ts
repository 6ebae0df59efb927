import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Socket } from "node:net";
import { resolve } from "node:path";
import { afterAll, expect, test } from "vitest";
import { exportFailure } from "./otel-export-failure.ts";
import { settingsIgnored } from "./otel-settings.ts";

// A collector that accepts the export and never answers: the shutdown's flush gives up on it
// rather than holding the process for the exporter's own timeout (set here to a minute, so a
// shutdown that waited for it would run past this test's limit).

const sockets: Socket[] = [];
const collector = createServer((socket) => {
  sockets.push(socket);
  socket.on("data", () => {});
});
afterAll(() => {
  for (const socket of sockets) socket.destroy();
  collector.close();
});

test("shutdown returns while a collector that never answers still holds the last spans", async () => {
  collector.listen(0, "127.0.0.1");
  await once(collector, "listening");
  const { port } = collector.address() as { port: number };
  const { out, err, code } = await traced(`http://otuser:otPASS@127.0.0.1:${port}`, {
    OTEL_EXPORTER_OTLP_TIMEOUT: "60000",
  });
  expect(out).toContain("shut down: false, left behind: true");
  expect(code).toBe(0);
  // The flush did reach the collector: it was the one left waiting, not skipped.
  expect(sockets.length).toBeGreaterThan(0);
  expect(err).toContain("spans still queued were not exported within 2 s and are lost");
  // Named without the password its URL holds (found by an outside tester).
  expect(err).toContain("otuser:redacted@");
  expect(err).not.toContain("otPASS");
}, 20_000);

/** A loopback port nothing listens on (it did a moment ago): a collector that is down. */
async function closedPort(): Promise<number> {
  const closed = createServer();
  closed.listen(0, "127.0.0.1");
  await once(closed, "listening");
  const { port } = closed.address() as { port: number };
  closed.close();
  return port;
}

test("a collector that is down is said in the log, once, not silently (found by an outside tester)", async () => {
  const port = await closedPort();
  const { err } = await traced(
    `http://127.0.0.1:${port}`,
    { OTEL_BSP_SCHEDULE_DELAY: "50", OTEL_EXPORTER_OTLP_TIMEOUT: "300" },
    2_000,
  );
  const warnings = err.split("\n").filter((line) => line.includes("OpenTelemetry could not export spans"));
  expect(warnings.length, err).toBe(1);
  expect(warnings[0]).toMatch(/ECONNREFUSED|connect/i);
}, 20_000);

test("a setting the SDK ignores is said as such at start, once each, and leaves the export failure its line (found by an outside tester)", async () => {
  const port = await closedPort();
  const { err } = await traced(
    `http://127.0.0.1:${port}`,
    {
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "300",
      OTEL_EXPORTER_OTLP_TIMEOUT: "abc",
      OTEL_PROPAGATORS: "tracecontext,nonsense",
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "abc",
      OTEL_EXPORTER_OTLP_PROTOCOL: "carrier-pigeon",
    },
    500,
  );
  const lines = err
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const ignored = lines.filter((line) => line.msg === "OpenTelemetry setting ignored");
  expect(
    ignored.map(({ variable, value, using }) => ({ variable, value, using })).sort(byVariable),
    err,
  ).toEqual(
    [
      { variable: "OTEL_EXPORTER_OTLP_TIMEOUT", value: "abc", using: "10000 (ms, the default)" },
      { variable: "OTEL_PROPAGATORS", value: "tracecontext,nonsense", using: "tracecontext" },
      { variable: "OTEL_TRACES_SAMPLER_ARG", value: "abc", using: "1" },
      { variable: "OTEL_EXPORTER_OTLP_PROTOCOL", value: "carrier-pigeon", using: "http/protobuf" },
    ].sort(byVariable),
  );
  // Said at start, before any export was tried.
  expect(lines.findIndex((line) => line.msg !== "OpenTelemetry setting ignored")).toBe(ignored.length);
  // The real failure is told at once, not a minute later behind a setting's line.
  const failures = lines.filter((line) => line.msg === "OpenTelemetry could not export spans");
  expect(failures.length, err).toBe(1);
  expect(failures[0]!.reason).toMatch(/ECONNREFUSED/);
  expect(err).not.toContain("metrics protocol");
}, 20_000);

test("Snooze names its service without writing OTEL_SERVICE_NAME, which every engine it starts would inherit (found in review)", async () => {
  const bodies: string[] = [];
  const receiver = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      bodies.push(body);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  const endpoint = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  const serviceOf = async (env: Record<string, string>) => {
    bodies.length = 0;
    const { out } = await traced(endpoint, { OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", ...env });
    const names = bodies.flatMap((body) =>
      (
        JSON.parse(body) as {
          resourceSpans: { resource: { attributes: { key: string; value: { stringValue?: string } }[] } }[];
        }
      ).resourceSpans.flatMap((r) =>
        r.resource.attributes.filter((a) => a.key === "service.name").map((a) => a.value.stringValue),
      ),
    );
    return { names: [...new Set(names)], inherited: /inherited: (.*)/.exec(out)?.[1] };
  };
  try {
    expect(await serviceOf({ OTEL_SERVICE_NAME: "" })).toEqual({
      names: ["telemetry-test"],
      inherited: "",
    });
    expect(await serviceOf({ OTEL_SERVICE_NAME: "mine" })).toEqual({ names: ["mine"], inherited: "mine" });
    expect(
      await serviceOf({ OTEL_SERVICE_NAME: "", OTEL_RESOURCE_ATTRIBUTES: "team=a,service.name=theirs" }),
    ).toEqual({ names: ["theirs"], inherited: "" });
  } finally {
    receiver.close();
  }
}, 30_000);

test("settings are told by the variable they came from, whatever words the SDK used", () => {
  const env = {
    OTEL_EXPORTER_OTLP_PROTOCOL: "carrier-pigeon",
    OTEL_PROPAGATORS: "nonsense",
    OTEL_TRACES_EXPORTER: "x",
  };
  expect(
    settingsIgnored(
      [
        'Unsupported OTLP metrics protocol: "carrier-pigeon". Using http/protobuf.',
        "Unsupported OTLP traces protocol: carrier-pigeon. Using http/protobuf.",
        'Propagator "nonsense" requested through environment variable is unavailable.',
        "Unrecognized OTEL_TRACES_EXPORTER value: x.",
        "Unable to set up trace exporter(s) due to invalid exporter and/or protocol values.",
        "something else entirely",
      ],
      env,
    ),
  ).toEqual([
    { variable: "OTEL_EXPORTER_OTLP_PROTOCOL", value: "carrier-pigeon", using: "http/protobuf" },
    {
      variable: "OTEL_PROPAGATORS",
      value: "nonsense",
      using: "none: no trace context is read from requests or sent on",
    },
    { variable: "OTEL_TRACES_EXPORTER", value: "x", using: "none: no spans are exported" },
    { reason: "something else entirely" },
  ]);
});

test("a wrong path is told with the URL tried, and a hint when the base endpoint already ends in /v1/traces (found by an outside tester)", async () => {
  const paths: string[] = [];
  const notFound = createHttpServer((request, response) => {
    paths.push(request.url!);
    request.resume();
    request.on("end", () => response.writeHead(404).end("404 page not found"));
  });
  notFound.listen(0, "127.0.0.1");
  await once(notFound, "listening");
  const { port } = notFound.address() as { port: number };
  try {
    const { err } = await traced(
      `http://otuser:otPASS@127.0.0.1:${port}/v1/traces`,
      { OTEL_BSP_SCHEDULE_DELAY: "50" },
      300,
    );
    const [failure, ...more] = err
      .split("\n")
      .filter((line) => line.includes("OpenTelemetry could not export spans"))
      .map((line) => JSON.parse(line) as Record<string, string>);
    expect(more).toEqual([]);
    expect(paths[0]).toBe("/v1/traces/v1/traces");
    expect(failure).toMatchObject({
      reason: "Not Found",
      url: `http://otuser:redacted@127.0.0.1:${port}/v1/traces/v1/traces`,
    });
    expect(failure!.hint).toContain("the SDK appends /v1/traces");
    expect(err).not.toContain("otPASS");
  } finally {
    notFound.close();
  }
}, 20_000);

test("an endpoint that is not http(s) is told as such, not as Node's 'Expected \"https:\"' (found by an outside tester)", async () => {
  const { err } = await traced("ftp://127.0.0.1:16515", { OTEL_BSP_SCHEDULE_DELAY: "50" }, 300);
  const failure = err.split("\n").find((line) => line.includes("OpenTelemetry could not export spans"));
  expect(JSON.parse(failure!)).toMatchObject({
    reason: "the OTLP endpoint must be an http:// or https:// URL, not ftp://",
    url: "ftp://127.0.0.1:16515/v1/traces",
  });
}, 20_000);

test("no hint for a Not Found whose base endpoint does not end in /v1/traces, nor for a full traces endpoint", () => {
  const notFound = JSON.stringify({ message: "Not Found", code: "404", name: "OTLPExporterError" });
  expect(exportFailure([notFound], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/otlp/" })).toEqual({
    reason: "Not Found",
    url: "http://c:4318/otlp/v1/traces",
  });
  expect(
    exportFailure([notFound], {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/v1/traces",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://d:4318/v1/traces",
    }),
  ).toEqual({ reason: "Not Found", url: "http://d:4318/v1/traces" });
});

const byVariable = (a: { variable?: unknown }, b: { variable?: unknown }) =>
  String(a.variable).localeCompare(String(b.variable));

/** A process that starts telemetry, ends a span every 100 ms for `spanningMs`, then shuts down. */
async function traced(endpoint: string, env: Record<string, string>, spanningMs = 0) {
  const telemetry = resolve(import.meta.dirname, "telemetry.ts");
  const logs = resolve(import.meta.dirname, "log.ts");
  const script = `
    const { startTelemetry } = await import(${JSON.stringify(telemetry)});
    const { createLogger } = await import(${JSON.stringify(logs)});
    const { trace } = await import("@opentelemetry/api");
    const { spansLeftBehind } = await import(${JSON.stringify(telemetry)});
    const telemetry = await startTelemetry("telemetry-test", createLogger({ component: "test" }));
    for (let at = 0; at < ${spanningMs}; at += 100) {
      trace.getTracer("t").startSpan("span").end();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    trace.getTracer("t").startSpan("last").end();
    console.log("inherited: " + (process.env.OTEL_SERVICE_NAME ?? "(unset)"));
    console.log("inherited exporter: " + (process.env.OTEL_TRACES_EXPORTER ?? "(unset)"));
    const flushed = await telemetry.shutdown();
    console.log("shut down: " + flushed + ", left behind: " + spansLeftBehind());
    process.exit(0);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: resolve(import.meta.dirname, ".."),
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_EXPORTER: "", ...env },
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (chunk) => (out += chunk));
  child.stderr!.on("data", (chunk) => (err += chunk));
  const [code] = await once(child, "exit");
  return { out, err, code };
}

test("OTEL_* names and booleans are read in any case, as the specification asks: NONE, ALWAYS_OFF, TraceContext, HTTP/JSON, TRUE (found by an outside tester)", async () => {
  const bodies: string[] = [];
  const receiver = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      bodies.push(body);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  receiver.listen(0, "127.0.0.1");
  await once(receiver, "listening");
  const endpoint = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
  const run = async (env: Record<string, string>) => {
    bodies.length = 0;
    const { out, err } = await traced(endpoint, env);
    const lines = err
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    return {
      // Sent as OTLP/JSON (the protocol read in upper case), or not at all.
      exported: bodies.filter((body) => body.startsWith("{")).length,
      otherwise: bodies.filter((body) => !body.startsWith("{")).length,
      complaints: lines.map((line) => line.msg),
      inherited: /inherited exporter: (.*)/.exec(out)?.[1],
    };
  };
  try {
    const on = await run({
      OTEL_TRACES_EXPORTER: "OTLP",
      OTEL_EXPORTER_OTLP_PROTOCOL: "HTTP/JSON",
      OTEL_PROPAGATORS: "TraceContext,Baggage",
      OTEL_TRACES_SAMPLER: "ParentBased_Always_On",
    });
    expect(on).toMatchObject({ otherwise: 0, complaints: [] });
    expect(on.exported).toBeGreaterThan(0);
    // Engines inherit the variables as they were set.
    expect(on.inherited).toBe("OTLP");
    expect(
      await run({ OTEL_TRACES_SAMPLER: "ALWAYS_OFF", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }),
    ).toMatchObject({
      exported: 0,
      otherwise: 0,
      complaints: [],
    });
    for (const off of [
      { OTEL_TRACES_EXPORTER: "NONE" },
      { OTEL_TRACES_EXPORTER: " None " },
      { OTEL_SDK_DISABLED: "TRUE" },
    ] as Record<string, string>[])
      expect(await run(off), JSON.stringify(off)).toMatchObject({
        exported: 0,
        otherwise: 0,
        complaints: [],
      });
  } finally {
    receiver.close();
  }
}, 30_000);
