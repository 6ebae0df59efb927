import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type Socket } from "node:net";
import { resolve } from "node:path";
import { afterAll, expect, test } from "vitest";

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
  const telemetry = resolve(import.meta.dirname, "telemetry.ts");
  const script = `
    const { startTelemetry } = await import(${JSON.stringify(telemetry)});
    const { trace } = await import("@opentelemetry/api");
    const telemetry = await startTelemetry("telemetry-test");
    trace.getTracer("t").startSpan("last").end();
    await telemetry.shutdown();
    console.log("shut down");
    process.exit(0);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: resolve(import.meta.dirname, ".."),
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: "60000",
      OTEL_TRACES_EXPORTER: "",
    },
  });
  let out = "";
  child.stdout!.on("data", (chunk) => (out += chunk));
  const [code] = await once(child, "exit");
  expect(out).toContain("shut down");
  expect(code).toBe(0);
  // The flush did reach the collector: it was the one left waiting, not skipped.
  expect(sockets.length).toBeGreaterThan(0);
}, 20_000);
