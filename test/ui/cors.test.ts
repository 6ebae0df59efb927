import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { httpEngine, startActivator, type TestActivator } from "../abuse/harness.ts";
import { launchChromium } from "../helpers/chromium.ts";

/**
 * A chat page served from another origin calls /v1/ from a real Chromium: with its origin in
 * --allowed-origins the browser's preflight and the POST go through (the engine's own CORS answer,
 * here a wrong one, does not reach the browser); without it the preflight gets a 403 and the page's
 * fetch fails, as the browser decides; and a page that skips the preflight (a no-cors POST with a
 * body of no content type or a form's) is refused by Snooze before the engine sees it.
 */

let browser: Browser;
let page: Server;
let pageOrigin: string;
let engine: Awaited<ReturnType<typeof httpEngine>>;
const engineSaw: string[] = [];
const activators: TestActivator[] = [];

beforeAll(async () => {
  engine = await httpEngine((req, res) => {
    engineSaw.push(`${req.method} ${req.url}`);
    req.resume();
    res.writeHead(200, {
      "content-type": "application/json",
      // An engine's CORS middleware with other settings: the browser must see Snooze's answer only.
      "access-control-allow-origin": "https://somewhere-else.example",
    });
    res.end(JSON.stringify({ object: "chat.completion", choices: [{ message: { content: "hi" } }] }));
  });
  page = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>chat</title>");
  });
  page.listen(0, "127.0.0.1");
  await new Promise((resolve) => page.once("listening", resolve));
  pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  for (const activator of activators) await activator.close();
  page?.close();
  engine?.server.close();
});

async function activatorAllowing(allowedOrigins: string[]): Promise<TestActivator> {
  const activator = await startActivator({}, { allowedOrigins });
  activators.push(activator);
  activator.plane.readyAt("m", engine.address);
  return activator;
}

/** What the page's fetch of `url` got: its status and body, or the browser's error. */
async function fetchFromPage(url: string) {
  const tab = await browser.newPage();
  try {
    await tab.goto(pageOrigin);
    return await tab.evaluate(async (target) => {
      try {
        const response = await fetch(target, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: "Bearer sk-page" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
        });
        return { status: response.status, body: await response.json() };
      } catch (error) {
        return { error: String(error) };
      }
    }, url);
  } finally {
    await tab.close();
  }
}

test("an allowed origin's page gets the answer; the engine's own CORS headers do not reach it", async () => {
  const snooze = await activatorAllowing([pageOrigin]);
  engineSaw.length = 0;
  expect(await fetchFromPage(`${snooze.url}/v1/chat/completions`)).toEqual({
    status: 200,
    body: { object: "chat.completion", choices: [{ message: { content: "hi" } }] },
  });
  // The preflight was answered by Snooze; only the POST reached the engine.
  expect(engineSaw).toEqual(["POST /v1/chat/completions"]);
  const preflight = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "OPTIONS",
    headers: { origin: pageOrigin, "access-control-request-method": "POST" },
  });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get("access-control-allow-origin")).toBe(pageOrigin);
});

test("without --allowed-origins the preflight is a 403 that says how to allow the page, and the browser refuses", async () => {
  const snooze = await activatorAllowing([]);
  engineSaw.length = 0;
  const result = await fetchFromPage(`${snooze.url}/v1/chat/completions`);
  expect(result).toEqual({ error: expect.stringContaining("Failed to fetch") });
  expect(engineSaw).toEqual([]);
  const preflight = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "OPTIONS",
    headers: { origin: pageOrigin, "access-control-request-method": "POST" },
  });
  expect(preflight.status).toBe(403);
  const { error } = (await preflight.json()) as { error: { code: string; message: string } };
  expect(error.code).toBe("cross_origin_refused");
  expect(error.message).toContain(`--allowed-origins ${pageOrigin}`);
});

test("a page that skips the preflight (no-cors POST, a Blob or text/plain body) is refused; the engine never sees it", async () => {
  const snooze = await activatorAllowing([]);
  engineSaw.length = 0;
  const tab = await browser.newPage();
  try {
    await tab.goto(pageOrigin);
    const sent = await tab.evaluate(async (target) => {
      const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
      // Both are "simple" requests: the browser sends them without asking; the answer stays opaque.
      await fetch(target, { method: "POST", mode: "no-cors", body: new Blob([body]) });
      await fetch(target, {
        method: "POST",
        mode: "no-cors",
        headers: { "content-type": "text/plain" },
        body,
      });
      return true;
    }, `${snooze.url}/v1/chat/completions`);
    expect(sent).toBe(true);
  } finally {
    await tab.close();
  }
  expect(engineSaw).toEqual([]);
  // What such a request gets, seen without a browser.
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { origin: pageOrigin },
    body: JSON.stringify({ model: "m", messages: [] }),
  });
  expect(response.status).toBe(403);
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe("cross_origin_refused");
});

test("an allowed page can read Retry-After and x-should-retry, which the OpenAI SDK's retries follow", async () => {
  // A model that never becomes ready within its hold budget: a 503 with Retry-After.
  const snooze = await startActivator({ holdBudget: 300 }, { allowedOrigins: [pageOrigin] });
  activators.push(snooze);
  const tab = await browser.newPage();
  try {
    await tab.goto(pageOrigin);
    const seen = await tab.evaluate(async (target) => {
      const response = await fetch(target, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [] }),
      });
      await response.text();
      return { status: response.status, retryAfter: response.headers.get("retry-after") };
    }, `${snooze.url}/v1/chat/completions`);
    // Without Access-Control-Expose-Headers the browser hid it, and the SDK retried at once, into
    // the hold or back-off Retry-After told of (found by an outside tester).
    expect(seen.status).toBe(503);
    expect(Number(seen.retryAfter)).toBeGreaterThanOrEqual(1);
  } finally {
    await tab.close();
  }
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { origin: pageOrigin, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [] }),
  });
  await response.text();
  expect(response.headers.get("access-control-expose-headers")).toBe(
    "Retry-After, X-Should-Retry, X-Request-Id",
  );
});
