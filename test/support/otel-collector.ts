import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { freePort } from "../../lib/free-port.ts";
import { goBinary } from "./go-binary.ts";

/**
 * A real OpenTelemetry Collector (core components, built from its Go modules by
 * hack/build-otelcol.sh) for the tests that assert span trees: Snooze exports OTLP to it as any
 * user's would, the collector batches and posts OTLP/HTTP JSON to a receiver here, and the spans
 * that arrive are kept, with their service and resource, for the test to walk.
 */

/** One span as OTLP/JSON carries it (ids in hex). */
export interface OtlpSpan {
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

export interface Span extends OtlpSpan {
  /** The resource's `service.name`. */
  service: string;
  /** The resource's attributes (`service.instance.id` tells replicas apart). */
  resource: Record<string, unknown>;
  attrs: Record<string, unknown>;
}

export const SERVER = 2;
export const CLIENT = 3;

/** The collector binary: built (or found in the cache) by the project's script; never skipped. */
export const collectorBinary = (): Promise<string> =>
  goBinary("build-otelcol.sh", "the OpenTelemetry Collector");

function value(v: Record<string, unknown>): unknown {
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  return v;
}

const attributes = (list: { key: string; value: Record<string, unknown> }[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, value(a.value)]));

export interface Collector {
  /** Where Snooze exports: the value for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint: string;
  /** Every span received so far, in arrival order. */
  spans: Span[];
  log(): string;
  close(): Promise<void>;
}

/**
 * Starts the test's OTLP/HTTP receiver on loopback and the collector in front of it (OTLP receiver,
 * batch processor, OTLP/HTTP JSON exporter), and resolves once the collector listens.
 */
export async function startCollector(): Promise<Collector> {
  const binary = await collectorBinary();
  const spans: Span[] = [];
  const receiver: Server = createServer((req, res) => {
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
          const resource = attributes(rs.resource?.attributes);
          const service = String(resource["service.name"]);
          for (const ss of rs.scopeSpans ?? [])
            for (const span of ss.spans ?? [])
              spans.push({ ...span, service, resource, attrs: attributes(span.attributes) });
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
  let output = "";
  const collector: ChildProcess = spawn(binary, ["--config", join(dir, "otelcol.yaml")], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  collector.stdout!.on("data", (chunk) => (output += chunk));
  collector.stderr!.on("data", (chunk) => (output += chunk));
  const endpoint = `http://127.0.0.1:${otlpPort}`;
  const deadline = Date.now() + 20_000;
  // Ready once its OTLP/HTTP port answers.
  for (;;) {
    const up = await fetch(`${endpoint}/v1/traces`, { method: "POST", body: "{}" })
      .then(() => true)
      .catch(() => false);
    if (up) break;
    if (collector.exitCode !== null || Date.now() > deadline) {
      collector.kill("SIGKILL");
      receiver.close();
      throw new Error(`the collector did not listen within 20 s; its log:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    endpoint,
    spans,
    log: () => output,
    async close() {
      if (collector.exitCode === null) {
        collector.kill("SIGTERM");
        await once(collector, "exit");
      }
      receiver.closeAllConnections();
      receiver.close();
    },
  };
}

/**
 * The standard variables that point a Snooze process at the collector, as a user would set them:
 * OTLP over HTTP, a short batch delay so spans arrive while the test waits, and no metrics or logs.
 */
export function otelEnv(collector: Collector, resource?: Record<string, string>): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
    OTEL_BSP_SCHEDULE_DELAY: "100",
    OTEL_METRICS_EXPORTER: "none",
    OTEL_LOGS_EXPORTER: "none",
    // Empty is unset: each command names its own service.
    OTEL_SERVICE_NAME: "",
    ...(resource
      ? {
          OTEL_RESOURCE_ATTRIBUTES: Object.entries(resource)
            .map(([k, v]) => `${k}=${v}`)
            .join(","),
        }
      : {}),
  };
}

/** Random hex, for trace and span ids a test sends as a caller would. */
export const hex = (n: number) =>
  Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join("");

export const childrenOf = (spans: Span[], span: Span) => spans.filter((s) => s.parentSpanId === span.spanId);
export const names = (list: Span[]) => list.map((s) => s.name).sort();

/** The tree under a span, for a failure message. */
export function tree(spans: Span[], root: Span, depth = 0): string {
  return [
    `${"  ".repeat(depth)}${root.name} (${root.service})`,
    ...childrenOf(spans, root).map((c) => tree(spans, c, depth + 1)),
  ].join("\n");
}
