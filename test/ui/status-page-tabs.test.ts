import type { Browser, Page, Request } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * Many tabs of the status page in one browser (real Chromium against a local Snooze). A browser
 * keeps at most six connections to one host for all its tabs, and each tab's event stream holds one.
 */

let snooze: LocalSnooze;
let browser: Browser;
beforeAll(async () => {
  [snooze, browser] = await Promise.all([
    startWith(`
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`),
    launchChromium(),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

/**
 * The tab goes to the background (or comes back), as a browser tells a page: headless Chromium
 * shows every tab at once, so the page is told here what a browser with windows tells it.
 */
const setHidden = (page: Page, hidden: boolean) =>
  page.evaluate(`(() => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => ${hidden} });
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "${hidden ? "hidden" : "visible"}" });
    document.dispatchEvent(new Event("visibilitychange"));
  })()`);
const live = (page: Page) => page.locator("#live").textContent();

test("tabs in the background let their streams go: a seventh tab loads, and a tab shown again catches up", async () => {
  const context = await browser.newContext();
  const tabs: Page[] = [];
  // Six tabs, each put in the background by the next one, as tabs opened one after another are.
  for (let i = 0; i < 6; i++) {
    const tab = await context.newPage();
    await tab.goto(snooze.url, { timeout: 5_000 });
    await expect.poll(() => live(tab)).toBe("live");
    await setHidden(tab, true);
    expect(await live(tab)).toBe("paused while hidden");
    tabs.push(tab);
  }
  // Found by an outside tester: the six streams held every connection the browser allows the
  // host, and a seventh tab never loaded (nor could the six ask for anything more).
  const seventh = await context.newPage();
  await seventh.goto(snooze.url, { timeout: 5_000 });
  await expect.poll(() => live(seventh)).toBe("live");
  // What happens while a tab is hidden, it shows once back, once.
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/wake`, { method: "POST" })).status).toBe(202);
  const started = (tab: Page) => tab.locator('#entries tr[data-kind="start"][data-model="qwen"]').count();
  await expect.poll(() => started(seventh), { timeout: 10_000 }).toBe(1);
  await setHidden(seventh, true);
  await setHidden(tabs[0]!, false);
  await expect.poll(() => live(tabs[0]!)).toBe("live");
  await expect
    .poll(() => tabs[0]!.locator('#models tr[data-model="qwen"] .tier').textContent())
    .toBe("ready");
  await expect.poll(() => started(tabs[0]!)).toBe(1);
  // A sleep while it is shown arrives on its stream, not twice.
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/sleep`, { method: "POST" })).status).toBe(200);
  await expect.poll(() => tabs[0]!.locator('#entries tr[data-model="qwen"]').count()).toBe(2);
  expect(await started(tabs[0]!)).toBe(1);
  await context.close();
}, 40_000);

test("eight tabs shown at once share one event stream: each loads and shows a wake, and closing the tab that reads it hands it to another", async () => {
  const context = await browser.newContext();
  // The event streams the open tabs hold, as the browser sees its requests (a closed tab's end
  // with it, and the browser tells no end of theirs).
  const streams = new Set<Request>();
  context.on("request", (r) => void (r.url().includes("/snooze/v1/events/stream") && streams.add(r)));
  context.on("requestfinished", (r) => void streams.delete(r));
  context.on("requestfailed", (r) => void streams.delete(r));
  const open = () => [...streams].filter((r) => !r.frame().page().isClosed()).length;
  const tabs: Page[] = [];
  // Found by an outside tester: six tabs shown at once held every connection the browser allows
  // the host with their streams, and a seventh never loaded.
  for (let i = 0; i < 8; i++) {
    const tab = await context.newPage();
    await tab.goto(snooze.url, { timeout: 5_000 });
    await expect.poll(() => live(tab)).toBe("live");
    tabs.push(tab);
  }
  expect(open()).toBe(1);
  const entries = (tab: Page) => tab.locator('#entries tr[data-model="qwen"]').count();
  const before = await entries(tabs[0]!);
  const tier = (tab: Page) => tab.locator('#models tr[data-model="qwen"] .tier').textContent();
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/wake`, { method: "POST" })).status).toBe(202);
  for (const tab of tabs) await expect.poll(() => tier(tab), { timeout: 10_000 }).toBe("ready");
  // Whichever tab reads the stream, another takes it over once it is gone, from where it was.
  for (const tab of tabs.splice(0, 4)) await tab.close();
  await expect.poll(open).toBe(1);
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/sleep`, { method: "POST" })).status).toBe(200);
  for (const tab of tabs) {
    await expect.poll(() => tier(tab), { timeout: 10_000 }).toBe("asleep-1");
    await expect.poll(() => entries(tab)).toBe(before + 2);
    expect(await live(tab)).toBe("live");
  }
  await context.close();
}, 60_000);
