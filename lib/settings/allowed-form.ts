import { z } from "zod";

/**
 * The allowed form of a settings field in words ("1 or 2", "true or false", "an integer from 1 to
 * 65535"), read from the one zod schema so a denial can say what would have been accepted when
 * zod's own message does not ("Invalid input").
 */
export function allowedForm(schema: z.ZodType | undefined): string | undefined {
  if (!schema) return undefined;
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  // A text with a form of its own (a duration, a size, a URL) is more than "a string": say which.
  return (json.type === "string" ? textForm(schema) : undefined) ?? describe(json);
}

/**
 * The form a text field's own check asks for (`a duration like "30s", ...`), read from what it says
 * of a text that has no form at all; undefined when any text will do.
 */
function textForm(schema: z.ZodType): string | undefined {
  const result = schema.safeParse("\u0000");
  const issue = result.error?.issues.find((i) => i.code === "invalid_format");
  return issue?.message.replace(/^expected /, "");
}

/**
 * What is wrong with a value, in words: zod's message, unless it is a generic one ("Invalid input",
 * a wrong type, a number out of range) and the field's allowed form is known: then that form.
 */
export function reasonFor(issue: z.core.$ZodIssue, field: z.ZodType | undefined): string {
  if (issue.code === "too_small" && issue.origin === "array") {
    const least = Number(issue.minimum);
    return `needs at least ${least} ${least === 1 ? "entry" : "entries"}`;
  }
  const outOfRange = (issue.code === "too_big" || issue.code === "too_small") && issue.origin === "number";
  const generic =
    /^Invalid (input|option)/.test(issue.message) ||
    issue.code === "invalid_type" ||
    issue.code === "invalid_value" ||
    outOfRange;
  const form = generic ? allowedForm(field) : undefined;
  return form ? `expected ${form}` : issue.message;
}

/** A value as a person wrote it, cut short: `"soon"`, `3`, `(missing)`. */
export function showValue(value: unknown): string {
  if (value === undefined) return "(missing)";
  // JSON has no Infinity or NaN (it writes null): `priority: .inf` shows as written.
  const text =
    typeof value === "number" && !Number.isFinite(value) ? String(value) : jsonStart(value, shownChars);
  return text.length > shownChars ? `${text.slice(0, shownChars - 3)}...` : text;
}

const shownChars = 80;

/**
 * `value` as JSON.stringify writes it, but only its first `room` characters or a few more: what is
 * shown of a value is 80 characters, and JSON.stringify of the whole of it is recursive, so a value
 * nested 10,000 deep (a field a Model's CRD left untyped) overflowed the stack, and the webhook
 * refused the Model with "retry" instead of naming the field (found by an outside tester). Each
 * level writes a character at least, so this recursion stops within `room` levels.
 */
function jsonStart(value: unknown, room: number): string {
  if (typeof value === "string") return JSON.stringify(value.slice(0, room + 1));
  if (typeof value !== "object" || value === null) return JSON.stringify(value) ?? String(value);
  if (Array.isArray(value)) {
    let text = "[";
    for (let i = 0; i < value.length && text.length <= room; i++) {
      const item = value[i];
      const shown =
        item === undefined || typeof item === "function" ? "null" : jsonStart(item, room - text.length);
      text += (i > 0 ? "," : "") + shown;
    }
    return `${text}]`;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return JSON.stringify(value) ?? String(value);
  let text = "{";
  let first = true;
  for (const [key, item] of Object.entries(value)) {
    if (text.length > room) break;
    if (item === undefined || typeof item === "function") continue;
    text += `${first ? "" : ","}${JSON.stringify(key)}:`;
    text += jsonStart(item, Math.max(0, room - text.length));
    first = false;
  }
  return `${text}}`;
}

/** The field at `path` inside `schema` (through objects, records, lists and optional wrappers). */
export function fieldAt(schema: z.ZodType, path: readonly PropertyKey[]): z.ZodType | undefined {
  let at: z.ZodType | undefined = schema;
  for (const key of path) {
    const def = unwrapped(at)?._zod.def as unknown as Record<string, unknown> | undefined;
    if (def?.type === "object") at = (def.shape as Record<PropertyKey, z.ZodType>)[key];
    else if (def?.type === "record") at = def.valueType as z.ZodType;
    else if (def?.type === "array") at = def.element as z.ZodType;
    else return undefined;
  }
  return at;
}

/** The keys the mapping `schema` takes (none when it is not a mapping of named settings). */
export function keysOf(schema: z.ZodType | undefined): string[] {
  const def = unwrapped(schema)?._zod.def as unknown as Record<string, unknown> | undefined;
  return def?.type === "object" ? Object.keys(def.shape as object) : [];
}

/** The schema under optional, default, nullable, readonly and pipe wrappers. */
function unwrapped(schema: z.ZodType | undefined): z.ZodType | undefined {
  let at = schema;
  for (let depth = 0; at && depth < 8; depth++) {
    const def = at._zod.def as unknown as Record<string, unknown>;
    const inner = (def.innerType ?? (def.type === "pipe" ? def.in : undefined)) as z.ZodType | undefined;
    if (!inner) return at;
    at = inner;
  }
  return at;
}

function describe(json: Record<string, unknown>): string | undefined {
  const branches = (json.anyOf ?? json.oneOf) as Record<string, unknown>[] | undefined;
  if (Array.isArray(branches)) {
    const values = branches.flatMap((b) =>
      Array.isArray(b.enum) ? b.enum : "const" in b ? [b.const] : [],
    ) as unknown[];
    if (values.length === branches.length) return oneOf(values);
    // Two branches of one kind (two shapes of mapping) are one form to the reader.
    const parts = [...new Set(branches.map(describe).filter((p): p is string => p !== undefined))];
    return parts.length ? parts.join(", or ") : undefined;
  }
  if (Array.isArray(json.enum)) return oneOf(json.enum);
  if ("const" in json) return JSON.stringify(json.const);
  switch (json.type) {
    case "boolean":
      return "true or false";
    case "integer":
    case "number": {
      const noun = json.type === "integer" ? "an integer" : "a number";
      const min = typeof json.minimum === "number" && json.minimum > -Number.MAX_SAFE_INTEGER;
      const max = typeof json.maximum === "number" && json.maximum < Number.MAX_SAFE_INTEGER;
      if (min && max) return `${noun} from ${json.minimum} to ${json.maximum}`;
      // A bound that is not itself allowed (`.positive()`) is said so: "more than 0".
      const above =
        typeof json.exclusiveMinimum === "number" ? `more than ${json.exclusiveMinimum}` : undefined;
      const below =
        typeof json.exclusiveMaximum === "number" ? `less than ${json.exclusiveMaximum}` : undefined;
      const bounds = [min ? `at least ${json.minimum}` : above, max ? `at most ${json.maximum}` : below];
      const said = bounds.filter((b): b is string => b !== undefined);
      if (said.length === 0) return noun;
      return said.length === 1 && said[0]!.startsWith("at ")
        ? `${noun} of ${said[0]}`
        : `${noun} ${said.join(" and ")}`;
    }
    case "string":
      return "a string";
    case "array": {
      const items = json.items as Record<string, unknown> | undefined;
      return items?.type === "string" ? "a list of strings" : "a list";
    }
    case "object":
      // YAML's word: a file has mappings, not JavaScript objects.
      return "a mapping";
    default:
      return undefined;
  }
}

function oneOf(values: unknown[]): string {
  const shown = values.map((v) => JSON.stringify(v));
  if (shown.length === 1) return shown[0]!;
  return `${shown.slice(0, -1).join(", ")} or ${shown.at(-1)}`;
}
