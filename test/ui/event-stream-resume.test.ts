import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * The event stream read by the browser's own SSE client, `EventSource`, through a proxy whose
 * connections the test cuts: it reconnects by itself (the stream's `retry`), sends the id of the
 * last event it had as `Last-Event-ID`, and must get what it missed, once, and nothing twice; after
 * a restart of Snooze, the new run's entries from its first.
 */
const settings = `
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`;

let first: LocalSnooze;
let second: LocalSnooze | undefined;
let browser: Browser;
let proxy: Server;
/** Where the proxy sends new connections. */
let target: number;
const open = new Set<Socket>();

beforeAll(async () => {
  [first, browser] = await Promise.all([startWith(settings), launchChromium()]);
  target = Number(new URL(first.url).port);
  proxy = createServer((client) => {
    const upstream = tcpConnect(target, "127.0.0.1");
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      socket.on("error", () => {});
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  cut();
  proxy?.close();
  await browser?.close();
  await Promise.all([first?.close(1_000), second?.close(1_000)]);
});

/** A network blip: every connection through the proxy is cut. */
function cut(): void {
  for (const socket of open) socket.destroy();
}

const admin = (snooze: LocalSnooze, verb: string) =>
  fetch(`${snooze.url}/snooze/v1/models/qwen/${verb}`, { method: "POST" });

/** The page's EventSource: the entries' seq numbers in the order they came, and how often it opened. */
async function listen(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    window.seqs = [];
    window.opens = 0;
    const source = new EventSource("/snooze/v1/events/stream");
    source.onopen = () => window.opens++;
    source.addEventListener("entry", (e) => window.seqs.push(JSON.parse(e.data).seq));
  })()`);
}
const seqs = (page: Page) => page.evaluate("window.seqs") as Promise<number[]>;
const opens = (page: Page) => page.evaluate("window.opens") as Promise<number>;

test("an EventSource that reconnects gets what it missed, and nothing twice", async () => {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${(proxy.address() as { port: number }).port}/healthz`);
  await listen(page);
  await until(async () => (await opens(page)) === 1, 5_000, "the stream open");
  expect((await admin(first, "wake")).status).toBe(202);
  await until(async () => (await seqs(page)).length === 1, 10_000, "the cold start's entry");
  // Found by an outside tester: no event had an id, so the browser reconnected without
  // `Last-Event-ID` and was sent the whole last hour again.
  cut();
  expect((await admin(first, "sleep")).status).toBe(200);
  await until(async () => (await opens(page)) === 2, 10_000, "the stream open again");
  await until(async () => (await seqs(page)).includes(2), 5_000, "the sleep's entry");
  expect(await seqs(page)).toEqual([1, 2]);

  // Snooze restarts (another one at the same address): its entries are numbered anew, and the
  // browser's last id, from the run before, must not hide them.
  second = await startWith(settings);
  expect((await admin(second, "wake")).status).toBe(202);
  await until(
    async () =>
      ((await (await fetch(`${second!.url}/snooze/v1/timeline`)).json()) as any).entries.length === 1,
    10_000,
    "the new run's cold start",
  );
  target = Number(new URL(second.url).port);
  cut();
  await until(async () => (await opens(page)) === 3, 10_000, "the stream open on the new run");
  await until(async () => (await seqs(page)).length >= 3, 5_000, "the new run's entry");
  expect(await seqs(page)).toEqual([1, 2, 1]);
  await page.close();
}, 40_000);
