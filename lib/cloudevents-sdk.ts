import { createRequire } from "node:module";
import type * as CloudEvents from "cloudevents";

const require = createRequire(import.meta.url);
let sdk: typeof CloudEvents | undefined;

/**
 * The `cloudevents` SDK, loaded when it is first used: by the first event that comes in or the
 * first one a sink builds. A static import loads it (and its ajv schema, uuid and json-bigint, 36
 * modules) into every `snooze serve`, with or without a sink, before any event (issue 14: about
 * 1 MiB of an idle serve's RSS). Types come from `import type … from "cloudevents"`, which loads
 * nothing. cli/loaded-modules.test.ts checks that an idle serve leaves it unloaded.
 */
export function cloudEvents(): typeof CloudEvents {
  sdk ??= require("cloudevents") as typeof CloudEvents;
  return sdk;
}
