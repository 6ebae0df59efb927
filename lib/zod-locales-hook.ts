import { registerHooks } from "node:module";

/**
 * Keeps zod's 63 locales but English out of a `snooze` process (issue 14, idle memory). Every zod 4 entry
 * point (`zod`, `zod/mini`, `zod/v4/core`) re-exports them all (`export * as locales from
 * "../locales/index.js"`), 64 modules, and zod's exports map offers no path around that. Snooze
 * uses none of them: zod's one locale in use, its English default, is imported by zod itself from
 * `locales/en.js`, not from the index, and Snooze never calls `z.config`.
 *
 * This resolve hook answers that one import, made by zod's own modules, with lib/zod-locales.ts,
 * which exports English alone: `z.locales.en` still works, every message is zod's English one as
 * before, and `z.locales.fr` and the other 62 are missing. bin/snooze.js registers it before any
 * command loads, so it holds however `snooze` starts; tests (vitest) import zod without it, and
 * `lib/zod-locales-hook.test.ts` checks both give the same messages. Synchronous and in-thread
 * (`module.registerHooks`, Node >= 22.15; "active development" in Node's stability index; Node 24
 * prints no warning for it): no loader thread, and `require` goes through it too (zod's CommonJS build
 * imports `index.cjs`, not matched here, so it would load in full). Should a zod release use more
 * than `en` from that index, only a real `snooze` process would see it (vitest runs without the
 * hook): the loaded-modules test and the tests that run `snooze serve` are where it shows.
 */
const english = new URL("./zod-locales.ts", import.meta.url).href;
const index = "../locales/index.js";

registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    if (
      specifier === index &&
      resolved.url.endsWith("/node_modules/zod/v4/locales/index.js") &&
      // Imported by zod's own v4/core, v4/classic or v4/mini, nothing else.
      context.parentURL?.startsWith(new URL("..", resolved.url).href)
    )
      return { url: english };
    return resolved;
  },
});
