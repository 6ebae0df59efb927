import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, startWith, until } from "../helpers/local-snooze.ts";

/**
 * An engine whose output comes in pieces, as a pipe delivers Python's 8 KiB blocks: a line in two
 * writes, a UTF-8 character in two, a progress bar's carriage returns. A chat that says `exit` makes
 * it print a last line without its line end and exit.
 */
const engine = [
  "const port = Number(process.argv[1]);",
  "const later = (ms, f) => new Promise((r) => setTimeout(() => { f(); r(); }, ms));",
  "(async () => {",
  "  process.stdout.write('PYTHONUNBUFFERED=' + process.env.PYTHONUNBUFFERED + '\\n');",
  "  process.stdout.write('SNOOZE_ADMIN_TOKEN=' + process.env.SNOOZE_ADMIN_TOKEN + '\\n');",
  "  process.stdout.write('INFO the start of a line ');",
  "  await later(100, () => process.stdout.write('and its end\\nINFO caf'));",
  "  const e = Buffer.from('é\\n');",
  "  await later(100, () => process.stdout.write(e.subarray(0, 1)));",
  "  await later(100, () => process.stdout.write(e.subarray(1)));",
  "  await later(100, () => process.stderr.write('Loading: 50%\\rLoading: 100%\\n'));",
  "  require('node:http').createServer((req, res) => {",
  "    if (req.url === '/health') return res.end();",
  "    let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {",
  "      if (body.includes('exit')) { process.stderr.write('ERROR the last words, without a line end'); process.exit(3); }",
  "      res.setHeader('content-type', 'application/json');",
  "      res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }] }));",
  "    });",
  "  }).listen(port, '127.0.0.1');",
  "})();",
].join("\n");

/** A vLLM whose engine core ran out of memory: the cause, a traceback, then Python's warnings. */
const oom = [
  "const say = (line) => process.stderr.write(line + '\\n');",
  "say('ERROR [core.py:708] EngineCore failed to start.');",
  "say('ERROR [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.');",
  "say('Traceback (most recent call last):');",
  "say('RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}');",
  "say('resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects');",
  "say(\"  warnings.warn('resource_tracker: There appear to be %d '\");",
  "process.exit(1);",
].join("\n");

let snooze: LocalSnooze;
// Snooze's own environment may say it already (some CI images do): here it does not.
const inherited = process.env.PYTHONUNBUFFERED;
const adminToken = process.env.SNOOZE_ADMIN_TOKEN;
beforeAll(async () => {
  delete process.env.PYTHONUNBUFFERED;
  // The environment a `snooze serve` given its admin token by $SNOOZE_ADMIN_TOKEN has.
  process.env.SNOOZE_ADMIN_TOKEN = "the-admin-token";
  snooze = await startWith(`
models:
  pieces:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
  oom:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", oom, "${PORT}"])}
`);
});
afterAll(async () => {
  await snooze.close(1_000);
  if (inherited !== undefined) process.env.PYTHONUNBUFFERED = inherited;
  if (adminToken === undefined) delete process.env.SNOOZE_ADMIN_TOKEN;
  else process.env.SNOOZE_ADMIN_TOKEN = adminToken;
});

const lines = async (): Promise<string[]> => {
  const answer = (await (await fetch(`${snooze.url}/snooze/v1/models/pieces/logs`)).json()) as {
    replicas: { lines: string[] }[];
  };
  return answer.replicas.flatMap((log) => log.lines);
};

test("engine output is read in lines, not in the pipe's chunks: a line written in pieces is one line, whole; a Python engine is asked to write its lines unbuffered (found by an outside tester)", async () => {
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("pieces"))).status).toBe(200);
  expect(await lines()).toEqual([
    "PYTHONUNBUFFERED=1",
    // Snooze's admin token is not passed on to engines (found in review).
    "SNOOZE_ADMIN_TOKEN=undefined",
    "INFO the start of a line and its end",
    "INFO café",
    "Loading: 50%",
    "Loading: 100%",
  ]);
});

test("an engine's last line without its line end is among its last words", async () => {
  const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("pieces", { exit: true }));
  await response.arrayBuffer();
  await until(
    async () => (await lines()).includes("ERROR the last words, without a line end"),
    5_000,
    "the last line",
  );
});

test("a failed start's reason names the exception its last lines point to, though warnings came after it (found by an outside tester)", async () => {
  const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("oom"));
  expect(response.status).toBe(503);
  const { error } = (await response.json()) as { error: { code: string; message: string } };
  expect(error.code).toBe("activation_failed");
  expect(error.message).toContain(
    "engine exited (code 1): ERROR [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. … | RuntimeError: Engine core initialization failed.",
  );
});
