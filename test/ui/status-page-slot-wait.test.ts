import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { chat, sharedGpu, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * A wake asked for a slot member while another keeps the slot (its minResidency): the wake waits,
 * and the page says so in the member's row and in the slot's, until the swap lets it in (real
 * Chromium, a local Snooze with simulated engines). Named as vLLM names a model by its Hugging
 * Face id, `team/mistral`, beside a member `mistral`.
 */
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
    minResidency: 1h
    maxWait: 1h
models:
  llama:
    slot: gpu0
    command: ${simCommand(gpu)}
  team/mistral:
    slot: gpu0
    command: ${simCommand(gpu)}
  mistral:
    slot: gpu0
    command: ${simCommand(gpu)}
`),
    launchChromium(),
  ]);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("llama"))).status).toBe(200);
}, 20_000);
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

test("a wake waiting for its slot shows in the member's row and the slot's, until the swap", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const row = page.locator('#models tr[data-model="team/mistral"]:not(.logs)');
  await expect.poll(() => row.locator(".tier").textContent()).toBe("cold");
  await row.locator('button[data-action="wake"]').click();
  // Found by an outside tester: the row stayed cold with nothing held and nothing next, the slot
  // named llama its resident and nothing else, for as long as llama kept the slot.
  await expect
    .poll(() => row.locator(".next").textContent(), { timeout: 5_000 })
    .toMatch(/^waits for the slot, \d/);
  const slot = page.locator('#slots tr[data-slot="gpu0"] td.waiting');
  expect(await slot.textContent()).toMatch(/^team\/mistral \(wake, since .+\)$/);
  // The wait counts up at the page's clock.
  const first = await row.locator(".next").textContent();
  await expect.poll(() => row.locator(".next").textContent(), { timeout: 3_000 }).not.toBe(first);

  // llama stopped: the slot is free, the wake goes on, and the wait is gone from both.
  expect((await fetch(`${snooze.url}/snooze/v1/models/llama/stop`, { method: "POST" })).status).toBe(200);
  await expect.poll(() => row.locator(".tier").textContent(), { timeout: 10_000 }).toBe("ready");
  await expect.poll(() => slot.textContent(), { timeout: 5_000 }).toBe("–");
  await expect.poll(() => row.locator(".next").textContent(), { timeout: 5_000 }).toMatch(/^sleeps in /);
  // The resident is team/mistral, not the member named mistral. Found by an outside tester: a
  // model whose id ended another's after a "/" was marked "(resident)" with it.
  expect(await row.textContent()).toContain("gpu0 (resident)");
  const other = page.locator('#models tr[data-model="mistral"]:not(.logs)');
  expect(await other.locator(".tier").textContent()).toBe("cold");
  expect(await other.textContent()).not.toContain("(resident)");
  await page.close();
});
