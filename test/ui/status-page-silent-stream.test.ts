import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { type EventStreamProxy, eventStreamProxy } from "../helpers/event-stream-proxy.ts";
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
let proxy: EventStreamProxy;
/** While true the proxy passes nothing of any event stream on, and keeps its connection open. */
let silent = false;

beforeAll(async () => {
  [snooze, browser] = await Promise.all([startWith(settings), launchChromium()]);
  proxy = await eventStreamProxy(snooze.url, (text, res) => {
    if (!silent) res.write(text);
  });
});
afterAll(async () => {
  await browser?.close();
  proxy?.close();
  await snooze?.close(1_000);
});

test("a stream silent for 45 s is taken for lost: the page says so, reconnects, and shows what happened meanwhile", {
  timeout: 30_000,
}, async () => {
  const page = await browser.newPage();
  await page.clock.install();
  await page.goto(`${proxy.url}/`);
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
