import { request } from "node:http";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, startWith } from "../helpers/local-snooze.ts";

/**
 * What the engine receives of the caller's trace context, with tracing on and the SDK's default
 * propagators (OTEL_PROPAGATORS=tracecontext,baggage). The engine answers each chat with the
 * `traceparent`, `tracestate` and `baggage` it was sent.
 */
const engine = [
  "const port = Number(process.argv[1]);",
  "require('node:http').createServer((req, res) => {",
  "  if (req.url === '/health') return res.end();",
  "  req.resume(); req.on('end', () => {",
  "    const { traceparent, tracestate, baggage } = req.headers;",
  "    res.setHeader('content-type', 'application/json');",
  "    res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }], received: { traceparent, tracestate, baggage } }));",
  "  });",
  "}).listen(port, '127.0.0.1');",
].join("\n");

interface Received {
  traceparent?: string;
  tracestate?: string;
  baggage?: string;
}

const exporter = new InMemorySpanExporter();
let snooze: LocalSnooze;
beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
  snooze = await startWith(`
models:
  echo:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
});
afterAll(() => snooze.close(1_000));

/** Sends a chat with `headers` given as raw name/value pairs (a name may come twice). */
function send(headers: string[]): Promise<Received> {
  const url = new URL(snooze.url);
  const body = chat("echo").body;
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: "/v1/chat/completions",
        method: "POST",
        headers: ["host", url.host, "content-type", "application/json", ...headers],
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => {
          if (res.statusCode !== 200) reject(new Error(`${res.statusCode}: ${text}`));
          else resolve((JSON.parse(text) as { received: Received }).received);
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
const spanId = "00f067aa0ba902b7";
const tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

test("a valid traceparent: the engine gets the caller's trace (its CLIENT span as parent), tracestate and baggage", async () => {
  const received = await send([
    "traceparent",
    `00-${traceId}-${spanId}-01`,
    "tracestate",
    tracestate,
    "baggage",
    "userId=alice,isProduction=false",
  ]);
  expect(received.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  expect(received.traceparent).not.toContain(spanId);
  expect(received.tracestate).toBe(tracestate);
  expect(received.baggage).toBe("userId=alice,isProduction=false");
});

test("a higher version with more fields is continued by its first fields, its tracestate with it", async () => {
  const received = await send([
    "traceparent",
    `01-${traceId}-${spanId}-01-what-comes-later`,
    "tracestate",
    tracestate,
  ]);
  expect(received.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  expect(received.tracestate).toBe(tracestate);
});

describe("a traceparent Snooze cannot continue begins a new trace, and the caller's tracestate does not go on with it (W3C Trace Context: a vendor that restarts the trace deletes tracestate)", () => {
  // Found by an outside tester: the engine got Snooze's new traceparent beside the caller's
  // tracestate, vendor entries of another trace.
  const invalid: [string, string[]][] = [
    ["version ff", ["traceparent", `ff-${traceId}-${spanId}-01`]],
    ["uppercase hex", ["traceparent", `00-${traceId.toUpperCase()}-${spanId.toUpperCase()}-01`]],
    ["an all-zero trace id", ["traceparent", `00-${"0".repeat(32)}-${spanId}-01`]],
    ["an all-zero span id", ["traceparent", `00-${traceId}-${"0".repeat(16)}-01`]],
    ["version 00 with a fifth field", ["traceparent", `00-${traceId}-${spanId}-01-extra`]],
    ["not a traceparent", ["traceparent", "hello"]],
    [
      "two traceparent headers",
      [
        "traceparent",
        `00-${traceId}-${spanId}-01`,
        "traceparent",
        `00-${traceId.replace("4", "5")}-${spanId}-01`,
      ],
    ],
    ["none at all", []],
  ];
  for (const [what, headers] of invalid)
    test(what, async () => {
      const received = await send([...headers, "tracestate", tracestate, "baggage", "k=v"]);
      expect(received.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(received.traceparent).not.toContain(traceId);
      expect(received.tracestate).toBeUndefined();
      // Baggage is not part of the trace: it goes on.
      expect(received.baggage).toBe("k=v");
    });
});

test("a tracestate of which no entry is valid is not passed on as it came", async () => {
  const received = await send(["traceparent", `00-${traceId}-${spanId}-01`, "tracestate", "%%%,===,"]);
  expect(received.traceparent).toMatch(new RegExp(`^00-${traceId}-`));
  expect(received.tracestate).toBeUndefined();
});
