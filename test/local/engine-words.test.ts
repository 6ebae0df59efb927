import { execFile } from "node:child_process";
import { promisify } from "node:util";
import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import { serveProcess, writeConfig } from "../helpers/serve-process.ts";

/**
 * Engines whose words are hostile to a terminal: a C1 CSI (U+009B, ESC [ to a terminal), ESC
 * sequences that recolour and retitle it, a bell, bidirectional overrides, a line separator. One
 * prints them and exits, failing its start; the other is up and answers every request 500 with them.
 */
const hostileWords =
  "'x \\u009b31mcsi \\u202eevil\\u202c \\u2066iso\\u2069 \\x1b[31mred\\x1b]0;title\\x07 a\\u2028b'";
const diesSaying = `process.stdout.write(${hostileWords} + ' RuntimeError: boom\\n'); process.exit(1);`;
const answersSaying = [
  "const port = Number(process.argv[1]);",
  "require('node:http').createServer((req, res) => {",
  "  if (!req.url.startsWith('/v1/')) return res.end();",
  `  res.writeHead(500, { 'content-type': 'text/plain' }).end(${hostileWords});`,
  "}).listen(port, '127.0.0.1');",
].join("\n");

/** What a terminal would obey, or what would reorder or break the line a person reads. */
const obeyed = /[\p{Cc}\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

let stop: (() => void) | undefined;
afterEach(() => stop?.());

test("an engine's last words reach a 503's message, lastError and `snooze status` with every control shown, not obeyed (found by an outside tester: C1 controls and bidi overrides passed raw)", {
  timeout: 30_000,
}, async () => {
  const config = writeConfig(
    `models:\n  hostile:\n    sleep: false\n    command: ${JSON.stringify([process.execPath, "-e", diesSaying, "${PORT}"])}\n  rude:\n    sleep: false\n    warmup: false\n    command: ${JSON.stringify([process.execPath, "-e", answersSaying, "${PORT}"])}\n`,
  );
  const run = serveProcess(config);
  stop = () => run.child.kill("SIGKILL");
  const url = await run.url;
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
  const ask = (model: string) =>
    openai.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }).then(
      () => expect.unreachable(),
      (error: unknown) => error as InstanceType<typeof OpenAI.APIError>,
    );

  const failed = await ask("hostile");
  expect(failed.status).toBe(503);
  expect(failed.code).toBe("activation_failed");
  // Readable still: each control as its escape, the rest as the engine wrote it.
  expect(failed.message).toContain(
    "x \\x9b31mcsi \\u202eevil\\u202c \\u2066iso\\u2069 \\x1b[31mred\\x1b]0;title\\x07 a\\u2028b RuntimeError: boom",
  );
  expect(failed.message).not.toMatch(obeyed);

  const rude = await ask("rude");
  expect(rude.status).toBe(500);
  expect(rude.message).toContain("x \\x9b31mcsi \\u202eevil");
  expect(rude.message).not.toMatch(obeyed);

  const state = (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
    models: { id: string; lastError?: string }[];
  };
  const lastError = state.models.find((m) => m.id === "hostile")?.lastError;
  expect(lastError).toContain("\\x9b31mcsi");
  expect(lastError).not.toMatch(obeyed);

  // The logs API gives the output as printed, in JSON whose body is text too: what JSON leaves raw
  // (C1, U+2028, the bidi marks) is written as `\u` escapes, the same once parsed.
  const body = await (await fetch(`${url}/snooze/v1/models/hostile/logs`)).text();
  expect(body).not.toMatch(obeyed);
  const logs = JSON.parse(body) as { replicas: { lines: string[] }[] };
  expect(logs.replicas[0]!.lines.join("\n")).toContain(
    "x \u009b31mcsi \u202eevil\u202c \u2066iso\u2069 \x1b[31mred",
  );
  // So is every other answer of the admin API.
  expect(await (await fetch(`${url}/snooze/v1/models`)).text()).not.toMatch(obeyed);

  const { stdout } = await promisify(execFile)(process.execPath, ["bin/snooze.js", "status", "--url", url]);
  // Shown once as escapes: not escaped twice (`\\x9b`).
  expect(stdout).toContain("\\x9b31mcsi");
  expect(stdout).not.toContain("\\\\x9b");
  expect(stdout.replace(/\n/g, "")).not.toMatch(obeyed);
});

test("an engine that prints them and never becomes ready: its last output in the start's failure is shown the same way", {
  timeout: 30_000,
}, async () => {
  const printsAndWaits = `process.stdout.write(${hostileWords} + '\\n'); setInterval(() => {}, 1000);`;
  const config = writeConfig(
    `models:\n  stuck:\n    sleep: false\n    startTimeout: 1s\n    command: ${JSON.stringify([process.execPath, "-e", printsAndWaits, "${PORT}"])}\n`,
  );
  const run = serveProcess(config);
  stop = () => run.child.kill("SIGKILL");
  const url = await run.url;
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
  const failed = (await openai.chat.completions
    .create({ model: "stuck", messages: [{ role: "user", content: "hi" }] })
    .then(
      () => expect.unreachable(),
      (error: unknown) => error,
    )) as InstanceType<typeof OpenAI.APIError>;
  expect(failed.status).toBe(503);
  expect(failed.message).toContain("its last output: x \\x9b31mcsi \\u202eevil");
  expect(failed.message).not.toMatch(obeyed);
});
