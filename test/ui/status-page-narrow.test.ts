import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

/** The status page on a phone's width, and without JavaScript (real Chromium against a local Snooze). */

let snooze: LocalSnooze;
let browser: Browser;
beforeAll(async () => {
  [snooze, browser] = await Promise.all([
    startWith(`
slots:
  gpu0: {}
models:
  meta-llama/Llama-3.1-70B-Instruct:
    aliases: [llama70]
    slot: gpu0
    command: ${simCommand(["--enable-sleep-mode"])}
  qwen:
    slot: gpu0
    command: ${simCommand(["--enable-sleep-mode"])}
`),
    launchChromium(),
  ]);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
});
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

test("at 360 px the page is no wider than the screen: a table scrolls in its own box", async () => {
  const page = await browser.newPage({ viewport: { width: 360, height: 800 } });
  await page.goto(snooze.url);
  const row = page.locator('#models tr[data-model="qwen"]:not(.logs)');
  await expect.poll(() => row.locator(".tier").textContent()).toBe("ready");
  await expect.poll(() => page.locator('#slots tr[data-slot="gpu0"]').count()).toBe(1);
  // Found by an outside tester: the models and slots tables ran 530 px past their cards and the
  // page scrolled sideways as a whole, header and all.
  expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(360);
  for (const section of await page.locator("section:visible").all())
    expect((await section.boundingBox())!.x + (await section.boundingBox())!.width).toBeLessThanOrEqual(360);
  // The buttons are reached by scrolling the table's own box, and do their work there.
  const stop = row.locator('button[data-action="stop"]');
  await stop.scrollIntoViewIfNeeded();
  const box = (await stop.boundingBox())!;
  expect(box.x + box.width).toBeLessThanOrEqual(360);
  // A model's name is not squeezed to a letter or two a line (it was: `meta-` over twelve lines).
  const name = page.locator('#models tr[data-model="meta-llama/Llama-3.1-70B-Instruct"] .id');
  expect((await name.boundingBox())!.height).toBeLessThan(80);
  // Nor is the timeline's detail (`cold → ready (qwen-1)` was a character a line, the row 500 px tall).
  const entry = page.locator('#entries tr[data-kind="start"][data-model="qwen"]');
  expect((await entry.boundingBox())!.height).toBeLessThan(60);
  await stop.click();
  await expect.poll(() => row.locator(".tier").textContent()).toBe("cold");
  await page.close();
});

test("without JavaScript the page says it needs it, instead of loading for ever", async () => {
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto(snooze.url);
  // Found by an outside tester: it said `Loading…` and `connecting` with nothing to do either.
  expect(await page.locator(".noscript").count()).toBe(1);
  expect(await page.locator(".noscript").textContent()).toContain("This page needs JavaScript");
  expect(await page.locator(".noscript").isVisible()).toBe(true);
  expect(await page.locator("#models").textContent()).toBe("");
  expect(await page.locator("#live").textContent()).toBe("");
  await context.close();
});
