/**
 * The shapes of the admin API's answers, as far as the client commands read them, checked before
 * use: whatever else answers at `--url` (a proxy's HTML page, another service's `{}`) is then said
 * in words, not found out by a stack trace. Written by hand, not with zod: a client command does not
 * pay zod's load time (about 0.1 s) for a handful of fields.
 */

/** Checks a value: the first thing wrong with it, naming where (`models[0].id`), or undefined. */
export type Shape = (value: unknown, at: string) => string | undefined;

const kindOf = (value: unknown) =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
const where = (at: string) => at || "the answer";

const primitive =
  (type: "string" | "number" | "boolean"): Shape =>
  (value, at) =>
    typeof value === type ? undefined : `${where(at)} is ${kindOf(value)}, not a ${type}`;

export const string = primitive("string");
export const number = primitive("number");
export const boolean = primitive("boolean");

export const optional =
  (shape: Shape): Shape =>
  (value, at) =>
    value === undefined ? undefined : shape(value, at);

export const nullable =
  (shape: Shape): Shape =>
  (value, at) =>
    value === null ? undefined : shape(value, at);

export const array =
  (item: Shape): Shape =>
  (value, at) => {
    if (!Array.isArray(value)) return `${where(at)} is ${kindOf(value)}, not an array`;
    for (const [index, each] of value.entries()) {
      const problem = item(each, `${at}[${index}]`);
      if (problem) return problem;
    }
    return undefined;
  };

/** An object with at least these fields (others are let be: a newer Snooze may add some). */
export const object =
  (fields: Record<string, Shape>): Shape =>
  (value, at) => {
    if (typeof value !== "object" || value === null || Array.isArray(value))
      return `${where(at)} is ${kindOf(value)}, not an object`;
    for (const [name, field] of Object.entries(fields)) {
      const path = at ? `${at}.${name}` : name;
      const fieldValue = (value as Record<string, unknown>)[name];
      const problem =
        fieldValue === undefined && field(undefined, path) ? `${path} is missing` : field(fieldValue, path);
      if (problem) return problem;
    }
    return undefined;
  };

/** A model as `GET /snooze/v1/models` lists it (activator/admin.ts AdminModelView): what the commands show. */
const modelView = object({
  id: string,
  aliases: array(string),
  tier: string,
  since: string,
  held: number,
  inFlight: number,
  lastStartMs: optional(number),
  lastWakeMs: optional(number),
  lastError: optional(string),
  retryAt: optional(string),
  slot: optional(string),
  slotWait: optional(string),
  nextChange: optional(nullable(object({ tier: string, at: string }))),
  learning: optional(object({ gpuSeconds: object({ awake: number, saved: number }) })),
});

/** A slot as the admin API lists it (lib/slot-status.ts SlotStatus): whom `snooze wake` finds waiting. */
const slotView = object({ name: string, waiting: array(object({ model: string })) });

/** The last reload of the settings file, while it stands refused (activator/admin.ts ReloadFailure). */
const reloadFailure = object({ at: string, cause: string, file: string, problems: array(string) });

/** `GET /snooze/v1/models`. */
export const modelList = object({
  models: array(modelView),
  slots: optional(array(slotView)),
  shuttingDown: optional(boolean),
  reloadFailure: optional(reloadFailure),
});

/** The answer to `POST /snooze/v1/models/<id>/wake|sleep|stop`. */
export const actionAnswer = object({ tier: string });

/** `GET /snooze/v1/models/<id>/logs` (activator/admin.ts EngineLog). */
export const engineLogs = object({
  replicas: array(
    object({ replica: string, lines: array(string), total: number, unfinished: optional(array(string)) }),
  ),
});

/** A `tier` event of `/snooze/v1/events/stream` (lib/replica-event.ts ReplicaEvent): what `snooze wake` reads. */
export const tierEvent = object({
  model: string,
  replica: string,
  tier: string,
  error: optional(string),
  estimateMs: optional(number),
});
