import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { afterEach, expect, test } from "vitest";
import { until } from "../helpers/local-snooze.ts";
import { serveProcess, writeConfig } from "../helpers/serve-process.ts";

/**
 * An engine whose output is hostile to a log: characters that end a line for some readers (U+2028,
 * U+2029, NEL), a terminal's controls (ESC and the C1 CSI, an OSC 52 that would set the clipboard),
 * bidirectional overrides, a NUL, bytes that are not UTF-8, and a 1 MB line; then it exits, failing
 * its start. Its output reaches the log at debug level (`engine output`) and, as its last words, at
 * warn (`engine exited on its own`, `activation failed`).
 */
const hostile = [
  "process.stdout.write('before\\u2028after \\u2029para \\u0085nel \\u009b31mcsi \\u202eevil\\u202c \\u2066iso\\u2069 ' +",
  "  '\\x1b[31mred\\x1b[0m nul\\x00 \\x1b]52;c;aGk=\\x07\\n');",
  "process.stdout.write(Buffer.from([0x62, 0x61, 0x64, 0xff, 0xfe, 0xc3, 0x0a]));",
  "process.stdout.write('x'.repeat(1 << 20) + '\\n');",
  "process.exit(1);",
].join("\n");

let stop: (() => void) | undefined;
afterEach(() => stop?.());

test("every log line is one line of JSON to Node's readline, whatever an engine printed, with no terminal control raw in it (found by an outside tester: U+2028 split a warning in two)", {
  timeout: 30_000,
}, async () => {
  const config = writeConfig(
    `models:\n  hostile:\n    sleep: false\n    command: ${JSON.stringify([process.execPath, "-e", hostile, "${PORT}"])}\n`,
  );
  const run = serveProcess(config, [], { env: { ...process.env, SNOOZE_LOG_LEVEL: "debug" } });
  stop = () => run.child.kill("SIGKILL");
  const lines: string[] = [];
  createInterface({ input: run.child.stderr! }).on("line", (line) => lines.push(line));
  const url = await run.url;
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "hostile", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(response.status).toBe(503);
  run.child.kill("SIGTERM");
  await once(run.child, "close");
  const records = lines.map((line) => {
    expect(() => JSON.parse(line), line).not.toThrow();
    return JSON.parse(line) as Record<string, unknown>;
  });
  const failed = records.find((r) => r.msg === "activation failed");
  // The words are all there, each control shown as its escape (lib/engine-words.ts): a reason
  // reaches clients (a 503's message, lastError), not only the log.
  expect(String(failed?.reason)).toContain(
    "before\\u2028after \\u2029para \\x85nel \\x9b31mcsi \\u202eevil\\u202c \\u2066iso\\u2069 \\x1b[31mred",
  );
  expect(records.filter((r) => r.msg === "engine output").map((r) => r.line)).toContain(
    "bad\ufffd\ufffd\ufffd",
  );
  expect(lines.join("\n")).toBe(run.stderr().trimEnd());
  for (const line of lines) {
    expect(line).not.toMatch(/[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/u);
    // The 1 MB line is kept to its start and its end, in every line that carries it.
    expect(line.length).toBeLessThan(16_384);
  }
});

/** An engine that prints 1.5 KB lines as fast as it can, and answers as an engine does. */
const talkative = [
  "const port = Number(process.argv[1]);",
  "require('node:http').createServer((req, res) => res.end()).listen(port, '127.0.0.1');",
  "const line = 'INFO ' + 'y'.repeat(1500) + '\\n';",
  "setInterval(() => { for (let i = 0; i < 200; i++) process.stdout.write(line); }, 5);",
].join("\n");

const rssBytes = (pid: number) =>
  Number(/VmRSS:\s*(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) * 1024;

test("a stderr no one reads holds Snooze's memory bounded: lines past the bound are dropped, then said with their count (found by an outside tester: 17 MB a second, without end)", {
  timeout: 60_000,
}, async () => {
  const config = writeConfig(
    `models:\n  talkative:\n    sleep: false\n    warmup: false\n    command: ${JSON.stringify([process.execPath, "-e", talkative, "${PORT}"])}\n`,
  );
  const run = serveProcess(config, [], { env: { ...process.env, SNOOZE_LOG_LEVEL: "debug" } });
  stop = () => run.child.kill("SIGKILL");
  const url = await run.url;
  // From here on nothing reads Snooze's stderr: the pipe fills, and Node queues what comes after.
  run.child.stderr!.pause();
  const before = rssBytes(run.child.pid!);
  expect((await fetch(`${url}/snooze/v1/models/talkative/wake`, { method: "POST" })).status).toBe(202);
  // 120,000 lines of debug log (about 190 MB) written while no one reads.
  const printed = async () => {
    const answer = await fetch(`${url}/snooze/v1/models/talkative/logs?lines=1`);
    const { replicas } = (await answer.json()) as { replicas: { total: number }[] };
    return replicas[0]?.total ?? 0;
  };
  await until(async () => (await printed()) > 120_000, 50_000, "the engine's lines");
  expect(rssBytes(run.child.pid!) - before).toBeLessThan(96 * 1024 * 1024);
  run.child.stderr!.resume();
  await until(() => run.stderr().includes('"msg":"log lines dropped'), 10_000, "the dropped lines said");
  const said = run
    .stderr()
    .split("\n")
    .find((line) => line.includes('"msg":"log lines dropped'))!;
  expect(JSON.parse(said)).toMatchObject({
    level: "warn",
    msg: "log lines dropped: stderr was not read as fast as they came",
    dropped: expect.any(Number),
  });
  expect(JSON.parse(said).dropped).toBeGreaterThan(0);
});
