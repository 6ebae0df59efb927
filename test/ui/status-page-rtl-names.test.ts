import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { chat, sharedGpu, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * Models named in Hebrew, sharing a slot: a swap between them reads in the order it happened, the
 * page's arrow between the two names (real Chromium, a local Snooze with simulated engines).
 */
const from = "אלף";
const to = "בית";
let snooze: LocalSnooze;
let browser: Browser;

beforeAll(async () => {
  const gpu = sharedGpu();
  [snooze, browser] = await Promise.all([
    startWith(`
defaults:
  sleepAfter: 5m
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
models:
  ${from}:
    slot: gpu0
    command: ${simCommand(gpu)}
  ${to}:
    slot: gpu0
    command: ${simCommand(gpu)}
`),
    launchChromium(),
  ]);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat(from))).status).toBe(200);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat(to))).status).toBe(200);
}, 20_000);
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

/**
 * The left edges, as shown, of the first occurrence in `selector`'s text of each of `parts`.
 * Browser-side code as text: this project's TypeScript has no DOM types.
 */
function leftEdges(selector: string, parts: string[]): string {
  return `(() => {
    const cell = document.querySelector(${JSON.stringify(selector)});
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    const texts = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) texts.push(node);
    return ${JSON.stringify(parts)}.map((part) => {
      for (const node of texts) {
        const at = node.data.indexOf(part);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + part.length);
        return range.getBoundingClientRect().left;
      }
      return null;
    });
  })()`;
}

test("a swap between two models named right to left reads from the one swapped out to the one swapped in", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const swap = '#entries tr[data-kind="swap"] td:last-child';
  await expect.poll(() => page.locator(swap).textContent()).toBe(`${from} → ${to} on gpu0`);
  const lastSwap = '#slots tr[data-slot="gpu0"] td:last-child';
  await expect.poll(() => page.locator(lastSwap).textContent()).toMatch(new RegExp(`^${from} → ${to} in `));
  // Found by an outside tester: the two names and the arrow between them made one right-to-left
  // run, shown as `בית → אלף`: the swap read backwards.
  for (const selector of [swap, lastSwap]) {
    const [a, arrow, b] = (await page.evaluate(leftEdges(selector, [from, "→", to]))) as number[];
    expect(a).toBeLessThan(arrow!);
    expect(arrow).toBeLessThan(b!);
  }
  await page.close();
});
