import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

/** Debian's Chromium, or the one SNOOZE_CHROMIUM names. */
const executablePath = process.env.SNOOZE_CHROMIUM ?? "/usr/bin/chromium";

/**
 * A real headless Chromium for the status page's tests. A missing one fails the test that asks,
 * saying how to get it, rather than skipping it.
 */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(executablePath))
    throw new Error(`no Chromium at ${executablePath}: apt-get install chromium (or set SNOOZE_CHROMIUM)`);
  return chromium.launch({ executablePath, headless: true });
}
