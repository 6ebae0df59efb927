import { afterAll, beforeAll, expect, test } from "vitest";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { createLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat } from "../helpers/local-snooze.ts";

/**
 * An engine's API key (vLLM's `--api-key`, which clients send as their bearer token) and its
 * Hugging Face token are in no log line, engine output shown or failure told (found by an outside
 * tester: `engine starting` logged the whole command, key included, at info level). The engine
 * prints its arguments as vLLM does at start (`non-default args: {...}`); a chat saying `exit`
 * makes it print them again and exit, so they are its last words.
 */
const key = "sk-engine-key-0123456789";
const hfToken = "hf_abcdefghijklmnop";
const engine = [
  "const [port, ...args] = process.argv.slice(1);",
  "const say = () => console.log('INFO non-default args: ' + JSON.stringify(args));",
  "say();",
  "require('node:http').createServer((req, res) => {",
  "  if (req.url === '/health') return res.end();",
  "  let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {",
  "    if (body.includes('exit')) { say(); process.exit(3); }",
  "    res.setHeader('content-type', 'application/json');",
  "    res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }] }));",
  "  });",
  "}).listen(Number(port), '127.0.0.1');",
].join("\n");

const lines: string[] = [];
let snooze: LocalSnooze;
beforeAll(async () => {
  const command = [process.execPath, "-e", engine, "${PORT}", "--api-key", key, `--hf-token=${hfToken}`];
  snooze = await startLocalSnooze({
    config: parseConfig(
      `
models:
  keyed:
    sleep: false
    command: ${JSON.stringify(command)}
`,
      "test.yaml",
    ),
    log: createLogger({}, (line) => void lines.push(line), "debug"),
    host: "127.0.0.1",
    port: 0,
    statsIntervalMs: 200,
  });
});
afterAll(() => snooze.close(1_000));

test("the engine's API key and token are hidden in `engine starting`, its output in the log and `snooze logs`, and its last words in a failure", async () => {
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("keyed"))).status).toBe(200);
  const starting = lines.map((line) => JSON.parse(line)).find((line) => line.msg === "engine starting");
  expect(starting.command).toContain("--api-key [redacted] --hf-token=[redacted]");

  const failed = await fetch(
    `${snooze.url}/v1/chat/completions`,
    chat("keyed", { messages: [{ role: "user", content: "exit" }] }),
  );
  expect(failed.status).toBe(502);
  const failure = await failed.text();
  expect(failure).toContain("engine exited (code 3)");

  const logs = await (await fetch(`${snooze.url}/snooze/v1/models/keyed/logs`)).text();
  expect(logs).toContain("non-default args");
  for (const told of [lines.join("\n"), logs, failure]) {
    expect(told).not.toContain(key);
    expect(told).not.toContain(hfToken);
  }
});
