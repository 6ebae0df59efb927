import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * A stream that goes silent without being closed: Snooze frozen, a network or a laptop's sleep
 * that dropped the connection without a word, a proxy that stopped passing it on. Snooze writes a
 * comment every 15 s, so the page takes 45 s of nothing for a lost stream: it says so, greys what
 * it shows and reconnects. The page reaches Snooze here through a proxy that can stop passing the
 * stream on while keeping its connection open; the page's clock is Playwright's, moved on 46 s.
 */
const settings = `
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`;

let snooze: LocalSnooze;
let browser: Browser;
let proxy: Server;
/** While true the proxy passes nothing of any event stream on, and keeps its connection open. */
let silent = false;

beforeAll(async () => {
  [snooze, browser] = await Promise.all([startWith(settings), launchChromium()]);
  const target = new URL(snooze.url);
  proxy = createServer((req, res) => {
    const upstream = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (!req.url?.startsWith("/snooze/v1/events/stream")) return void answer.pipe(res);
        answer.on("data", (chunk: Buffer) => {
          if (!silent) res.write(chunk);
        });
        answer.on("end", () => res.end());
      },
    );
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  await browser?.close();
  proxy?.close();
  proxy?.closeAllConnections();
  await snooze?.close(1_000);
});

test("a stream silent for 45 s is taken for lost: the page says so, reconnects, and shows what happened meanwhile", {
  timeout: 30_000,
}, async () => {
  const page = await browser.newPage();
  await page.clock.install();
  await page.goto(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}/`);
  const live = page.locator("#live");
  const tier = page.locator('#models tr[data-model="qwen"] .tier');
  await expect.poll(() => live.textContent()).toBe("live");
  expect(await tier.textContent()).toBe("cold");

  silent = true;
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/wake`, { method: "POST" })).status).toBe(202);
  // Found by an outside tester: with the stream silent (Snooze stopped with SIGSTOP for 70 s) the
  // page said "live" throughout, its countdowns running.
  await page.clock.fastForward(46_000);
  await expect
    .poll(() => live.textContent(), { timeout: 5_000 })
    .toMatch(/^disconnected since .+; reconnecting$/);
  expect(await page.evaluate("document.body.classList.contains('offline')")).toBe(true);

  silent = false;
  await page.clock.fastForward(2_000);
  await expect.poll(() => live.textContent(), { timeout: 10_000 }).toBe("live");
  await expect.poll(() => tier.textContent(), { timeout: 10_000 }).toBe("ready");
  await page.close();
});
