/**
 * The `locales` namespace zod exports in a `snooze` process: English only, the one locale zod
 * itself uses (its default, which it imports from `locales/en.js` directly). Put in place of zod's
 * own index of 63 locales by the resolve hook in lib/zod-locales-hook.ts.
 */
export { default as en } from "zod/v4/locales/en.js";
