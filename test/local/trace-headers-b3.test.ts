import { afterEach, expect, test } from "vitest";
import { type ServeProcess, serveProcess, writeConfig } from "../helpers/serve-process.ts";

/**
 * What the engine receives of a caller's B3 context with `OTEL_PROPAGATORS=b3` or `b3multi`, in a
 * real `snooze serve`. OpenTelemetry's B3 propagator reads either encoding from the caller and
 * writes the one configured; the caller's headers of the other encoding went on to the engine as
 * they came (found by an outside tester). B3 readers take a single `b3` header before `x-b3-*`, so
 * with `b3multi` an engine's spans hung under the caller's span, not under Snooze's engine call.
 */
const engine = [
  "const port = Number(process.argv[1]);",
  "require('node:http').createServer((req, res) => {",
  "  if (req.url === '/health') return res.end();",
  "  req.resume(); req.on('end', () => {",
  "    const received = Object.fromEntries(Object.entries(req.headers).filter(([name]) => /^(b3|x-b3-)/.test(name)));",
  "    res.setHeader('content-type', 'application/json');",
  "    res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }], received }));",
  "  });",
  "}).listen(port, '127.0.0.1');",
].join("\n");

const traceId = "80f198ee56343ba864fe8b2a57d3eff7";
const spanId = "e457b5a2e4d86bd1";
const parentId = "05e3ac9a4f6e3b90";

let serve: ServeProcess | undefined;
afterEach(async () => {
  serve?.child.kill("SIGTERM");
  await serve?.exited;
  serve = undefined;
});

async function start(propagators: string): Promise<string> {
  const config = writeConfig(`
models:
  echo:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
  serve = serveProcess(config, [], {
    env: { ...process.env, OTEL_PROPAGATORS: propagators, OTEL_TRACES_EXPORTER: "console" },
  });
  serve.child.stdout!.resume(); // the console exporter's spans
  return serve.url;
}

async function send(url: string, headers: Record<string, string>): Promise<Record<string, string>> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "echo", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { received: Record<string, string> }).received;
}

test("b3multi: a caller's single b3 header is continued, and the engine gets only Snooze's x-b3-* headers", async () => {
  const url = await start("b3multi");
  const received = await send(url, { b3: `${traceId}-${spanId}-1-${parentId}` });
  expect(received.b3).toBeUndefined();
  expect(received["x-b3-traceid"]).toBe(traceId);
  expect(received["x-b3-spanid"]).toMatch(/^[0-9a-f]{16}$/);
  expect(received["x-b3-spanid"]).not.toBe(spanId);
  expect(received["x-b3-parentspanid"]).toBeUndefined();
});

test("b3: a caller's x-b3-* headers are continued, and the engine gets only Snooze's single b3 header", async () => {
  const url = await start("b3");
  const received = await send(url, {
    "x-b3-traceid": traceId,
    "x-b3-spanid": spanId,
    "x-b3-parentspanid": parentId,
    "x-b3-sampled": "1",
  });
  expect(Object.keys(received)).toEqual(["b3"]);
  expect(received.b3).toMatch(new RegExp(`^${traceId}-[0-9a-f]{16}-1$`));
  expect(received.b3).not.toContain(spanId);
});
