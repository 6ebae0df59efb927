import { once } from "node:events";
import { createInterface } from "node:readline";
import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import { serveProcess, writeConfig } from "../helpers/serve-process.ts";

/**
 * An engine that is up and breaks every answer after its first bytes: each request to it ends in
 * `engine call failed`, a warning a client can cause as often as it sends requests.
 */
const breaker = [
  "const port = Number(process.argv[1]);",
  "require('node:http').createServer((req, res) => {",
  "  if (!req.url.startsWith('/v1/')) return res.end();",
  "  res.writeHead(200, { 'content-type': 'application/json' });",
  "  res.write('{\"id\":');",
  "  setTimeout(() => res.socket.destroy(), 5);",
  "}).listen(port, '127.0.0.1');",
].join("\n");

let stop: (() => void) | undefined;
afterEach(() => stop?.());

test("a client whose every request breaks the engine's answer cannot flood the log: the first warnings are written, the rest counted (found by an outside tester: a line per request)", {
  timeout: 30_000,
}, async () => {
  const config = writeConfig(
    `models:\n  breaker:\n    sleep: false\n    warmup: false\n    command: ${JSON.stringify([process.execPath, "-e", breaker, "${PORT}"])}\n`,
  );
  const run = serveProcess(config);
  stop = () => run.child.kill("SIGKILL");
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: run.child.stderr! }).on("line", (line) => lines.push(JSON.parse(line)));
  const url = await run.url;
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
  let failed = 0;
  for (let i = 0; i < 40; i++) {
    await openai.chat.completions
      .create({ model: "breaker", messages: [{ role: "user", content: "hi" }] })
      .catch(() => failed++);
  }
  expect(failed).toBe(40);
  run.child.kill("SIGTERM");
  await once(run.child, "close");
  const warned = lines.filter((line) => line.msg === "engine call failed");
  // The first is never hidden, and a few more show it goes on; not one per request.
  expect(warned.length).toBeGreaterThan(0);
  expect(warned.length).toBeLessThanOrEqual(10);
  expect(warned[0]).toMatchObject({ level: "warn", model: "breaker" });
});
