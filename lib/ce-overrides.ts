import type { Logger } from "./log.ts";

/**
 * Knative SinkBinding's `K_CE_OVERRIDES`: the extension attributes it asks every event to carry,
 * read as Knative means them, and said once when an entry is not used.
 */

/**
 * Attributes Snooze sets itself, or that the CloudEvents spec defines (context attributes, and the
 * sequence and distributed-tracing extensions Snooze writes): an override never replaces them.
 */
export const ownAttributes: ReadonlySet<string> = new Set([
  "specversion",
  "id",
  "source",
  "type",
  "subject",
  "time",
  "datacontenttype",
  "dataschema",
  "data",
  "sequence",
  "sequencetype",
  "traceparent",
  "tracestate",
]);

/** A CloudEvents attribute name: lowercase a-z and 0-9, at most 20 characters (spec 3.1.1). */
const attributeName = /^[a-z0-9]{1,20}$/;

/** What `K_CE_OVERRIDES` adds to every event, and each entry it holds that is not used, and why. */
export interface CeOverrides {
  extensions: Record<string, string>;
  ignored: string[];
}

/**
 * Reads Knative SinkBinding's `K_CE_OVERRIDES` as Knative means it: `{"extensions": {...}}`, each
 * a string value under a valid attribute name. Anything else is not used, and `ignored` says which
 * entry and why: a key outside `extensions`, a bad name, a value that is not a string, or one of
 * Snooze's own attributes (`sequence`, `traceparent`, `type`...), which an override never replaces.
 */
export function readCeOverrides(text: string | undefined): CeOverrides {
  const extensions: Record<string, string> = {};
  const ignored: string[] = [];
  if (!text) return { extensions, ignored };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return { extensions, ignored: [`not JSON (${(error as Error).message}); nothing of it is used`] };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return {
      extensions,
      ignored: ['not a JSON object like {"extensions":{"name":"value"}}; nothing of it is used'],
    };
  for (const key of Object.keys(parsed)) {
    if (key === "extensions") continue;
    ignored.push(
      `${key}: only "extensions" is read (Knative's K_CE_OVERRIDES)${ownAttributes.has(key) ? `, and ${key} is an attribute Snooze or the CloudEvents spec defines` : ""}`,
    );
  }
  const given = (parsed as { extensions?: unknown }).extensions;
  if (given === undefined) return { extensions, ignored };
  if (typeof given !== "object" || given === null || Array.isArray(given)) {
    ignored.push('extensions: must be a JSON object of names and string values, like {"team":"ml"}');
    return { extensions, ignored };
  }
  for (const [name, value] of Object.entries(given)) {
    if (!attributeName.test(name))
      ignored.push(
        `extensions.${name}: not a CloudEvents attribute name (lowercase a-z and 0-9, at most 20 characters)`,
      );
    else if (ownAttributes.has(name))
      ignored.push(
        `extensions.${name}: an attribute Snooze or the CloudEvents spec defines, which an override never replaces`,
      );
    else if (typeof value !== "string")
      ignored.push(`extensions.${name}: the value must be a string, not ${JSON.stringify(value)}`);
    else extensions[name] = value;
  }
  return { extensions, ignored };
}

/**
 * Extension attributes Knative's SinkBinding asks for in `K_CE_OVERRIDES` (`{"extensions":{...}}`);
 * one warning names each entry not used, and why.
 */
export function ceOverrides(text = process.env.K_CE_OVERRIDES, log?: Logger): Record<string, string> {
  const { extensions, ignored } = readCeOverrides(text);
  if (ignored.length > 0)
    log?.warn("K_CE_OVERRIDES: entries not used", {
      ignored,
      used: Object.keys(extensions),
    });
  return extensions;
}

/** The `K_CE_OVERRIDES` text warned about already: a reload's new sink does not warn again. */
let overridesWarned: string | undefined;

/** `K_CE_OVERRIDES` of this process: its warning once, not again at each sink a reload builds. */
export function processCeOverrides(log: Logger): Record<string, string> {
  const text = process.env.K_CE_OVERRIDES;
  const warned = text !== undefined && text === overridesWarned;
  overridesWarned = text;
  return ceOverrides(text, warned ? undefined : log);
}
