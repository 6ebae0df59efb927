import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { launchChromium } from "../helpers/chromium.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * The status page in a real headless Chromium (Debian's `chromium`, driven by playwright-core),
 * against a local Snooze with simulated engines. `.ci/run` installs Chromium when it is missing,
 * so this suite never skips.
 */
/**
 * Where the screenshot goes: docs/images when asked to refresh it (`SNOOZE_SCREENSHOTS=1`), else a
 * temporary folder, so a test run leaves the checkout as it was.
 */
const images = process.env.SNOOZE_SCREENSHOTS
  ? join(import.meta.dirname, "../../docs/images")
  : mkdtempSync(join(tmpdir(), "snooze-screenshots-"));

let snooze: LocalSnooze;
/** The settings the page's Snooze runs (a reload test writes them to a file). */
let settings: string;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  const gpuDir = mkdtempSync(join(tmpdir(), "snooze-gpu-"));
  const gpu = ["--enable-sleep-mode", "--gpu-id", "0", "--gpu-memory", "24GiB", "--model-memory", "16GiB"];
  const launched = launchChromium();
  settings = `
defaults:
  sleepAfter: 5m
  zeroAfter: 30m
slots:
  gpu0:
    minResidency: 0s
    swapCooldown: 0s
models:
  qwen:
    aliases: [qwen3]
    command: ${simCommand(["--enable-sleep-mode"])}
  llama:
    slot: gpu0
    command: ${simCommand([...gpu, "--gpu-dir", gpuDir])}
  mistral:
    slot: gpu0
    sleepLevel: 2
    command: ${simCommand([...gpu, "--gpu-dir", gpuDir])}
  broken:
    command: ${simCommand(["--no-such-flag"])}
`;
  snooze = await startWith(settings);
  // mistral holds the slot before the page opens (its cold start overlaps Chromium's).
  const [answer] = await Promise.all([
    fetch(`${snooze.url}/v1/chat/completions`, chat("mistral")),
    launched.then((b) => (browser = b)),
  ]);
  expect(answer.status).toBe(200);
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  mkdirSync(images, { recursive: true });
}, 20_000);

afterAll(async () => {
  await browser?.close();
  await snooze?.close(1_000);
});

const row = (model: string) => page.locator(`#models tr[data-model="${model}"]:not(.logs)`);
const tierOf = (model: string) => row(model).locator(".tier");

describe("the status page", () => {
  test("loads with every model, its tier and no replicas", async () => {
    const response = await page.goto(snooze.url);
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-security-policy"]).toContain("script-src 'sha256-");
    // No framing (clickjacking the buttons), no sniffing, no referrer (found by an outside tester:
    // X-Frame-Options was missing, for browsers that do not read the CSP's frame-ancestors).
    expect(response?.headers()).toMatchObject({
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
    });
    expect(response?.headers()["content-security-policy"]).toContain("frame-ancestors 'none'");
    await expect.poll(() => tierOf("qwen").textContent()).toBe("cold");
    expect(await tierOf("llama").textContent()).toBe("cold");
    expect(await row("qwen").locator(".aliases").textContent()).toBe("qwen3");
    expect(await page.locator("#live").textContent()).toBe("live");
    // A cold model's GPU time saved ticks in the page, as the totals do (found by an outside tester).
    const saved = row("llama").locator(".saved div").first();
    const before = await saved.textContent();
    await expect.poll(() => saved.textContent(), { timeout: 5_000 }).not.toBe(before);
    // /ui is the same page.
    expect((await fetch(`${snooze.url}/ui`)).headers.get("content-type")).toContain("text/html");
  });

  test("shows a cold start as it happens, without a reload", async () => {
    // Browser-side code as text: this project's TypeScript has no DOM types.
    await page.evaluate("window.marker = 1");
    const seen = page.evaluate(`new Promise((resolve) => {
      const tiers = [];
      const observer = new MutationObserver(() => {
        const tier = document.querySelector('#models tr[data-model="qwen"] .tier')?.textContent ?? "";
        if (tiers.at(-1) !== tier) tiers.push(tier);
        if (tier === "ready") {
          observer.disconnect();
          resolve(tiers);
        }
      });
      observer.observe(document.getElementById("models"), { childList: true, subtree: true });
    })`) as Promise<string[]>;
    const answer = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(answer.status).toBe(200);
    // Re-renders before the request may show cold again; after it, the page never goes back.
    const tiers = await seen;
    expect(tiers.slice(tiers.indexOf("starting"))).toEqual(["starting", "ready"]);
    expect(await page.evaluate("window.marker")).toBe(1);
    // The timeline lists the cold start with its duration; the next change counts down.
    const entry = page.locator('#entries tr[data-kind="start"][data-model="qwen"]');
    await expect.poll(() => entry.count()).toBe(1);
    expect(await entry.textContent()).toMatch(/cold start\d+(\.\d+)?m?s/);
    await expect.poll(() => row("qwen").locator(".next").textContent()).toMatch(/^sleeps in (4m\d+s|5m)$/);
    expect(await row("qwen").locator(".replica").textContent()).toMatch(/^qwen-\d+ ready$/);
  });

  test("a model waiting out a back-off after failed starts shows when it tries again, as `snooze status` does", async () => {
    // Found by an outside tester: the CLI said `retry in 59.8s`, the page's Next column `–`.
    // Its engine exits at once: four failed starts leave a back-off of 4 s (0, 1, 2, then 4 s).
    for (let i = 0; i < 4; i++)
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("broken"))).status).toBe(503);
    await expect.poll(() => row("broken").locator(".next").textContent()).toMatch(/^retry in [1-4](\.\d)?s$/);
    expect(await row("broken").locator(".err").textContent()).toMatch(/^start of broken failed/);
  });

  test("the sleep, wake and stop buttons act on the model", async () => {
    // Found by an outside tester: to a screen reader every row's buttons were "wake", "sleep",
    // "stop", "logs", none saying which model. Each is found here as one reads it out.
    const button = (name: string) => page.getByRole("button", { name, exact: true });
    // From the keyboard: the focus stays on the button through the redraws its answer and the
    // tier events bring (found by an outside tester: each sent it back to the top of the page).
    const focused = () => page.evaluate("document.activeElement.getAttribute('aria-label')");
    await button("sleep qwen").focus();
    await page.keyboard.press("Enter");
    await expect.poll(() => tierOf("qwen").textContent()).toBe("asleep-1");
    expect(await focused()).toBe("sleep qwen");
    await page.keyboard.press("Shift+Tab");
    expect(await focused()).toBe("wake qwen");
    await page.keyboard.press("Enter");
    await expect.poll(() => tierOf("qwen").textContent()).toBe("ready");
    expect(await focused()).toBe("wake qwen");
    await expect
      .poll(() => page.locator('#entries tr[data-model="qwen"] .kind').allTextContents())
      .toEqual(["wake", "sleep", "cold start"]);
    // Sleeping saved accelerator time, shown per model and in total.
    expect(await page.locator("#saved").textContent()).toMatch(/\d/);
    expect(await button("stop llama").count()).toBe(1);
    // The log tail's button says whether it is open; the connection's state is a live region.
    expect(await button("logs of mistral").getAttribute("aria-expanded")).toBe("false");
    await button("logs of mistral").click();
    await expect.poll(() => button("logs of mistral").getAttribute("aria-expanded")).toBe("true");
    await button("logs of mistral").click();
    await expect.poll(() => button("logs of mistral").getAttribute("aria-expanded")).toBe("false");
    expect(await page.getByRole("status").textContent()).toBe("live");
  });

  test("a browser whose clock is 10 minutes ahead shows the times by Snooze's clock", async () => {
    // qwen is ready (the test above woke it) and sleeps after 5m of quiet.
    await expect.poll(() => row("qwen").locator(".next").textContent()).toMatch(/^sleeps in 4m/);
    const skewed = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await skewed.clock.install({ time: Date.now() + 10 * 60_000 });
    await skewed.goto(snooze.url);
    const qwen = skewed.locator('#models tr[data-model="qwen"]:not(.logs)');
    await expect.poll(() => qwen.locator(".tier").textContent()).toBe("ready");
    // Found by an outside tester: "sleeps now" and "for 10m", Snooze up for 10m.
    await expect.poll(() => qwen.locator(".next").textContent()).toMatch(/^sleeps in 4m/);
    expect(await qwen.locator(".for").textContent()).toMatch(/^for \d+(\.\d)?m?s$/);
    expect(await skewed.locator("#uptime").textContent()).toMatch(/^\d+(\.\d)?s$/);
    await skewed.close();
  });

  test("a swap on a shared slot shows on the timeline; the log tail shows the engine's output", async () => {
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("llama"))).status).toBe(200);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("mistral"))).status).toBe(200);
    // Newest first: mistral (started before the page loaded) gave way to llama, then took it back.
    const swaps = page.locator('#entries tr[data-kind="swap"]');
    await expect.poll(() => swaps.count()).toBe(2);
    expect(await swaps.nth(0).textContent()).toContain("llama → mistral on gpu0");
    expect(await swaps.nth(1).textContent()).toContain("mistral → llama on gpu0");
    expect(await tierOf("llama").textContent()).toBe("asleep-1");
    expect(await row("llama").textContent()).toContain("gpu0");
    await expect.poll(() => row("mistral").textContent()).toContain("(resident)");

    await row("qwen").locator('button[data-action="logs"]').click();
    const logs = page.locator('tr.logs[data-model="qwen"] pre');
    // The sim logs JSON lines, as `snooze sim` does.
    await expect.poll(() => logs.textContent()).toMatch(/"msg":/);
    // Settled before the picture: the slot's row has caught up with the timeline.
    await expect.poll(() => page.locator('#slots tr[data-slot="gpu0"] td').nth(6).textContent()).toBe("2");
    await expect.poll(() => row("mistral").locator(".held").textContent()).toBe("0");
    await page.screenshot({ path: join(images, "status-page.png"), fullPage: true });

    await row("qwen").locator('button[data-action="stop"]').click();
    await expect.poll(() => tierOf("qwen").textContent()).toBe("cold");
    expect(await row("qwen").locator(".replica").count()).toBe(0);
  });

  test("a refused reload of the settings shows as a banner at once, until a reload applies", async () => {
    // Found by an outside tester: a refused reload showed only in the log; the page looked normal.
    const file = join(mkdtempSync(join(tmpdir(), "snooze-page-reload-")), "snooze.yaml");
    writeFileSync(file, settings.replace("sleepAfter: 5m", "sleepAfter: soon"));
    expect((await snooze.models!.reload(file, "SIGHUP")).result).toBe("invalid");
    const failure = page.locator("#reload-failure");
    // Pushed by the event stream, not left to the page's 15 s backstop.
    await expect.poll(() => failure.isVisible(), { timeout: 3_000 }).toBe(true);
    expect(await failure.locator("#reload-failure-title").textContent()).toMatch(
      /^The settings file .*snooze\.yaml was refused at .* \(SIGHUP\); Snooze runs the settings it had:$/,
    );
    expect(await failure.locator("pre").textContent()).toMatch(
      /snooze\.yaml:3:\d+: defaults\.sleepAfter: expected a duration/,
    );
    writeFileSync(file, settings);
    expect((await snooze.models!.reload(file, "SIGHUP")).result).toBe("unchanged");
    await expect.poll(() => failure.isVisible(), { timeout: 3_000 }).toBe(false);
  });

  test("a model a reload adds shows at once, and one it removes goes", async () => {
    // Found by an outside tester: an added model showed only at the page's 15 s backstop refresh.
    const file = join(mkdtempSync(join(tmpdir(), "snooze-page-reload-")), "snooze.yaml");
    writeFileSync(file, `${settings}  gemma:\n    command: ${simCommand(["--enable-sleep-mode"])}\n`);
    expect((await snooze.models!.reload(file, "SIGHUP")).result).toBe("applied");
    await expect.poll(() => row("gemma").count(), { timeout: 3_000 }).toBe(1);
    expect(await tierOf("gemma").textContent()).toBe("cold");
    // Its log tail open when it goes: found by an outside tester, the page went on asking for the
    // removed model's lines every 2 s, a 404 in the browser's console each time.
    await row("gemma").locator('button[data-action="logs"]').click();
    const asked: string[] = [];
    const onRequest = (request: { url(): string }) => asked.push(request.url());
    page.on("request", onRequest);
    writeFileSync(file, settings);
    expect((await snooze.models!.reload(file, "SIGHUP")).result).toBe("applied");
    await expect.poll(() => row("gemma").count(), { timeout: 3_000 }).toBe(0);
    asked.length = 0;
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    page.off("request", onRequest);
    expect(asked.filter((url) => url.includes("/models/gemma/logs"))).toEqual([]);
  });

  test("after Snooze restarts at the same address, the page lists the new process's entries", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: the page kept the old process's entries and, asking only for
    // entries numbered after the old ones, never showed a new one.
    const { port } = new URL(snooze.url);
    await snooze.close(1_000);
    // While Snooze cannot be reached the page says since when, greys what it shows and stops its
    // clocks (found by an outside tester: it went on counting stale tiers down, "reconnecting" aside).
    const offline = () => page.evaluate("document.body.classList.contains('offline')");
    await expect.poll(offline, { timeout: 5_000 }).toBe(true);
    expect(await page.locator("#live").textContent()).toMatch(/^disconnected since .+; reconnecting$/);
    const clocks = () =>
      Promise.all([row("qwen").locator(".for").textContent(), page.locator("#uptime").textContent()]);
    const frozen = await clocks();
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect(await clocks()).toEqual(frozen);
    snooze = await startLocalSnooze({
      config: parseConfig(
        `models:\n  qwen:\n    command: ${simCommand(["--enable-sleep-mode"])}\n`,
        "test.yaml",
      ),
      log: silentLogger,
      host: "127.0.0.1",
      port: Number(port),
    });
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await expect
      .poll(() => page.locator("#entries tr .kind").allTextContents(), { timeout: 20_000 })
      .toEqual(["cold start"]);
    // Each read waits: on a loaded machine the page may draw the ready tier and the live state a
    // moment after the entries (two helpers' full runs saw this test fail beside other work).
    await expect.poll(() => tierOf("qwen").textContent(), { timeout: 10_000 }).toBe("ready");
    await expect.poll(offline, { timeout: 5_000 }).toBe(false);
    await expect.poll(() => page.locator("#live").textContent(), { timeout: 5_000 }).toBe("live");
  });
});
