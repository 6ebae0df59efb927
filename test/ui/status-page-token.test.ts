import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { simCommand } from "../helpers/local-snooze.ts";

/** With an admin token the page loads, asks for the token once, and then works (real Chromium). */
const token = "s3cret-token-for-the-page";

let snooze: LocalSnooze;
let browser: Browser;
beforeAll(async () => {
  const config = parseConfig(`models:\n  qwen:\n    command: ${simCommand()}\n`, "test.yaml");
  [snooze, browser] = await Promise.all([
    startLocalSnooze({ config, log: silentLogger, host: "127.0.0.1", port: 0, adminToken: token }),
    launchChromium(),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

test("with an admin token the page asks for it once and keeps it for the tab", async () => {
  const page = await browser.newPage();
  // Found by an outside tester: the page learned of the token from three refused calls, each a
  // 401 in the browser's console. It asks first now: no call is refused.
  const refused: string[] = [];
  page.on("response", (response) => {
    if (response.status() === 401) refused.push(response.url());
  });
  const consoleErrors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") consoleErrors.push(message.text());
  });
  await page.goto(snooze.url);
  const form = page.locator("#token-form");
  await expect.poll(() => form.isVisible()).toBe(true);
  expect(await page.locator("#banner-text").textContent()).toContain("needs its admin token");
  expect(refused).toEqual([]);
  await page.fill("#token", token);
  await form.locator("button").click();
  await expect.poll(() => page.locator('#models tr[data-model="qwen"] .tier').textContent()).toBe("cold");
  await expect.poll(() => page.locator("#live").textContent()).toBe("live");
  expect(await form.isVisible()).toBe(false);
  expect(refused).toEqual([]);
  expect(consoleErrors).toEqual([]);
  // A reload in the same tab needs no second prompt (sessionStorage); the token never left it.
  await page.reload();
  await expect.poll(() => page.locator('#models tr[data-model="qwen"] .tier').textContent()).toBe("cold");
  expect(await form.isVisible()).toBe(false);
  expect(await page.evaluate("sessionStorage.getItem('snooze-admin-token')")).toBe(token);
  // Without it, the admin API refuses.
  expect((await fetch(`${snooze.url}/snooze/v1/models`)).status).toBe(401);
});
