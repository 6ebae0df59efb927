import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { type EventStreamProxy, eventStreamProxy } from "../helpers/event-stream-proxy.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * The status page reads the event stream itself (over fetch, for the admin token). The stream
 * reaches it here through a proxy that rewrites its line ends, as the SSE standard allows any of
 * CRLF, LF and CR (a proxy or another server may send them), and cuts it so a CRLF is split
 * between two chunks. The page must apply the events as they come, in real Chromium.
 */
const settings = `
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`;

let snooze: LocalSnooze;
let browser: Browser;
let proxy: EventStreamProxy;
/** What the proxy turns each LF of the stream into. */
let lineEnd = "\n";

beforeAll(async () => {
  [snooze, browser] = await Promise.all([startWith(settings), launchChromium()]);
  proxy = await eventStreamProxy(snooze.url, (text, res) => {
    // Each CR written on its own, so a CRLF reaches the page in two reads where it can.
    for (const part of text.replaceAll("\n", lineEnd).split(/(?<=\r)/)) res.write(part);
  });
});
afterAll(async () => {
  await browser?.close();
  proxy?.close();
  await snooze?.close(1_000);
});

const admin = (verb: string) => fetch(`${snooze.url}/snooze/v1/models/qwen/${verb}`, { method: "POST" });

for (const [name, end] of [
  ["CRLF", "\r\n"],
  ["CR", "\r"],
  ["LF", "\n"],
] as const) {
  test(`the page applies the stream's events whose lines end with ${name} (found by an outside tester: LF alone was read)`, async () => {
    lineEnd = end;
    const page = await browser.newPage();
    try {
      await page.goto(`${proxy.url}/`);
      // The events the page applies, seen by wrapping its own handler (a poll would not call it).
      await page.evaluate(`(() => {
        window.applied = [];
        const apply = window.applyEvent;
        window.applyEvent = (event) => { window.applied.push(event.tier); return apply(event); };
      })()`);
      await until(async () => (await page.textContent("#live")) === "live", 10_000, "the stream open");
      const { models } = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as {
        models: { tier: string }[];
      };
      // A change of tier, whichever the last test left: each makes tier events.
      const verb = models[0]!.tier === "ready" ? "sleep" : "wake";
      expect((await admin(verb)).status).toBeLessThan(300);
      await until(
        async () => ((await page.evaluate("window.applied")) as string[]).length > 0,
        10_000,
        "a tier event applied",
      );
    } finally {
      await page.close();
    }
  }, 30_000);
}

test("the page's reader follows the standard's parsing: a CRLF split between chunks, comments, several data lines, one space dropped after the colon", async () => {
  const page = await browser.newPage();
  try {
    await page.goto(`${proxy.url}/`);
    const events = await page.evaluate(`(() => {
      const got = [];
      const read = window.sseReader((type, data) => got.push([type, data]));
      for (const chunk of [
        "retry: 2000\\r", "\\n\\r", "\\n",
        ": a comment\\r\\nevent: tier\\r", "\\ndata: {\\"a\\":", "1}\\r\\n\\r\\n",
        "event:entry\\rdata:  two spaces\\rdata:x\\r\\r",
        "data\\n\\n",
        "data: [1,\\ndata: 2]\\nid: 7\\n\\n",
        "event: lost\\n",
      ]) read(chunk);
      return got;
    })()`);
    expect(events).toEqual([
      ["tier", '{"a":1}'],
      ["entry", " two spaces\nx"],
      ["message", ""],
      ["message", "[1,\n2]"],
    ]);
  } finally {
    await page.close();
  }
}, 30_000);
