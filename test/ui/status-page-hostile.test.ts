import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * What an engine says reaches the status page: its failure (with its last words) under the tier
 * and in the timeline, its output in the log tail. A hostile or broken engine's text is shown as
 * text and within the page (real Chromium).
 */

/** A name longer than the strips' label column (never started). */
const longName = `${"a-long-model-name-".repeat(4)}that-ends-here`;
let snooze: LocalSnooze;
let browser: Browser;
/** Another origin's server: a script that ran in the page would call it. */
let beacon: Server;
const calls: string[] = [];

beforeAll(async () => {
  beacon = createServer((req, res) => {
    calls.push(req.url ?? "");
    res.end();
  });
  await new Promise<void>((resolve) => beacon.listen(0, "127.0.0.1", resolve));
  const { port } = beacon.address() as AddressInfo;
  const markup = `<img src=x onerror="window.pwned=1;fetch('http://127.0.0.1:${port}/img')"></script><script>window.pwned=2</script> \u202eevil`;
  // One line of markup (ending in a right-to-left override it never closes), then one word of
  // 20,000 characters; then the engine exits before it is ready.
  const script = `printf '%s\\n' '${markup}' '${"A".repeat(20_000)}' >&2; exit 1 # \${PORT}`;
  [snooze, browser] = await Promise.all([
    startWith(`
models:
  good:
    command: ${simCommand()}
  ${longName}:
    command: ${simCommand()}
  chatty:
    command: ["sh", "-c", "seq 1 300 >&2; exit 1 # \${PORT}"]
  constructor:
    command: ${simCommand()}
  hostile:
    command: ["sh", "-c", ${JSON.stringify(script)}]
`),
    launchChromium(),
  ]);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("hostile"))).status).toBe(503);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("chatty"))).status).toBe(503);
});
afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
  beacon?.close();
});

test("an engine's markup and a 20,000-character word are shown as text, within the page", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const row = page.locator('#models tr[data-model="hostile"]:not(.logs)');
  await expect.poll(() => row.locator(".err").textContent()).toContain("<img src=x onerror=");
  await expect
    .poll(() => page.locator('#entries tr[data-kind="failure"][data-model="hostile"]').textContent())
    .toContain("</script>");
  await row.locator('button[data-action="logs"]').click();
  const logs = page.locator('tr.logs[data-model="hostile"] pre');
  await expect.poll(() => logs.textContent()).toContain("<script>window.pwned=2</script>");
  expect(await page.evaluate("window.pwned")).toBeUndefined();
  expect(calls).toEqual([]);
  // Found by an outside tester: the word made the page 9,300 px wide, the buttons off screen, and
  // the failure under the tier ran down the page.
  expect(await page.evaluate("document.documentElement.scrollWidth")).toBeLessThanOrEqual(1280);
  const wake = await page.locator('#models tr[data-model="good"] button[data-action="wake"]').boundingBox();
  expect(wake!.x + wake!.width).toBeLessThanOrEqual(1280);
  expect((await row.locator(".err").boundingBox())!.height).toBeLessThan(150);
  // Only the cells that carry such text break: a time of day, a name in the timeline, a duration do not.
  // Browser-side code as text: this project's TypeScript has no DOM types.
  const lines = (selector: string) =>
    page.evaluate(`(() => {
      const range = document.createRange();
      range.selectNodeContents(document.querySelector(${JSON.stringify(selector)}));
      return range.getClientRects().length;
    })()`);
  expect(await lines('#entries tr[data-kind="failure"][data-model="hostile"] td:first-child')).toBe(1);
  expect(await lines('#entries tr[data-kind="failure"][data-model="hostile"] td.id')).toBe(1);
  expect(await lines('#models tr[data-model="good"] .saved div:last-child')).toBe(1);
  await page.close();
});

test("a mark in an engine's failure that reverses text reorders none of the page's own", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const detail = page.locator('#entries tr[data-kind="failure"][data-model="hostile"] td:last-child');
  await expect.poll(() => detail.textContent()).toMatch(/ \(hostile-\d+\)$/);
  // Found by an outside tester: the failure's U+202E ran on into the replica the page names after
  // it, shown backwards as `(1-elitsoh)`. Its "(" must stay left of its "h".
  const order = (await page.evaluate(`(() => {
    const suffix = document.querySelector('#entries tr[data-kind="failure"][data-model="hostile"] td:last-child').lastChild;
    const at = (offset) => {
      const range = document.createRange();
      range.setStart(suffix, offset);
      range.setEnd(suffix, offset + 1);
      return range.getBoundingClientRect().left;
    };
    return { paren: at(1), h: at(2) };
  })()`)) as { paren: number; h: number };
  expect(order.paren).toBeLessThan(order.h);
  await page.close();
});

test("a name longer than the strips' label column is cut there and shows whole on hover", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const label = page.locator(".strip-row span", { hasText: "a-long-model-name-" });
  await expect.poll(() => label.count()).toBe(1);
  expect(
    await label.evaluate(
      (node: { scrollWidth: number; clientWidth: number }) => node.scrollWidth > node.clientWidth,
    ),
  ).toBe(true);
  // Found by an outside tester: the cut name could be read whole nowhere on the strips.
  expect(await label.getAttribute("title")).toBe(longName);
  await page.close();
});

test("a log tail scrolled back stays where it is read while the page redraws", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  await page.getByRole("button", { name: "logs of chatty", exact: true }).click();
  const logs = page.locator('tr.logs[data-model="chatty"] pre');
  await expect.poll(() => logs.textContent()).toMatch(/\n300$/);
  type Box = { scrollTop: number; scrollHeight: number; clientHeight: number };
  expect(await logs.evaluate((pre: Box) => pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4)).toBe(
    true,
  );
  await logs.evaluate((pre: Box) => {
    pre.scrollTop = 40;
  });
  // Another model's wake: its tier events redraw the table (found by an outside tester: each
  // redraw pulled the tail back to its end, mid-read).
  expect((await fetch(`${snooze.url}/snooze/v1/models/good/wake`, { method: "POST" })).status).toBe(202);
  await expect.poll(() => page.locator('#models tr[data-model="good"] .tier').textContent()).toBe("ready");
  await page.waitForTimeout(1_500);
  expect(await logs.evaluate((pre: Box) => pre.scrollTop)).toBe(40);
  await page.close();
});

test("a model named constructor is a model like any other, not the page's Object", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(snooze.url);
  const row = page.locator('#models tr[data-model="constructor"]:not(.logs)');
  await expect.poll(() => row.locator(".tier").textContent()).toBe("cold");
  // The tail as the click draws it, before its lines come.
  const first = await page.evaluate(`(() => {
    document.querySelector('#models tr[data-model="constructor"] button[data-action="logs"]').click();
    return document.querySelector('tr.logs[data-model="constructor"] pre').textContent;
  })()`);
  // Found by an outside tester: "function Object() { [native code] }", and its replicas written
  // onto the page's global Object, kept there through every refresh.
  expect(first).toBe("loading…");
  expect((await fetch(`${snooze.url}/snooze/v1/models/constructor/wake`, { method: "POST" })).status).toBe(
    202,
  );
  await expect.poll(() => row.locator(".tier").textContent()).toBe("ready");
  expect(await page.evaluate("Object.keys(Object)")).toEqual([]);
  await page.close();
});
