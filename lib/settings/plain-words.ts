import type { z } from "zod";
import { allowedForm, fieldAt } from "./allowed-form.ts";

/**
 * A zod error map that says, for every kind of issue, what the value should be, in a sentence for
 * the person editing the file ("expected an integer from 0 to 100000", "may not be empty") rather
 * than zod's wording ("Too big: expected int to be <=9007199254740991"). Fields with a message of
 * their own keep it; this speaks only where zod would. `root` is the schema parsed, so the field
 * at an issue's path tells the form it takes. The value found is added by the caller, as written.
 */
export function inPlainWords(root: z.ZodType): z.core.$ZodErrorMap {
  return (issue) => sentenceFor(issue, () => allowedForm(fieldAt(root, issue.path ?? [])));
}

function sentenceFor(issue: z.core.$ZodRawIssue, form: () => string | undefined): string {
  const expected = (fallback: string) => `expected ${form() ?? fallback}`;
  switch (issue.code) {
    case "invalid_type":
      return expected(nounFor(String(issue.expected)));
    case "invalid_value":
      return expected(oneOf(issue.values));
    case "invalid_union":
      return expected("one of the forms this setting takes");
    case "too_small":
    case "too_big":
      return sizeSentence(issue, form);
    case "invalid_format":
      return issue.format === "regex" && "pattern" in issue
        ? `expected text of the form ${String(issue.pattern)}`
        : `expected ${formatNoun(issue.format)}`;
    case "not_multiple_of":
      return `must be a multiple of ${issue.divisor}`;
    case "unrecognized_keys":
      return `unknown key${issue.keys.length === 1 ? "" : "s"} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
    case "invalid_key":
      return "is not a valid name";
    case "invalid_element":
      return "holds an entry that is not valid";
    default:
      return "is not allowed here";
  }
}

/** A value too small or too large: a text's or a list's length, or a number out of its range. */
function sizeSentence(
  issue: z.core.$ZodRawIssue<z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig>,
  form: () => string | undefined,
): string {
  const small = issue.code === "too_small";
  const bound = Number(
    small ? (issue as z.core.$ZodIssueTooSmall).minimum : (issue as z.core.$ZodIssueTooBig).maximum,
  );
  const exclusive = issue.inclusive === false;
  if (issue.origin === "string") {
    if (small && bound <= 1) return "may not be empty";
    return `must be ${small ? "at least" : "at most"} ${bound} characters long`;
  }
  if (issue.origin === "array" || issue.origin === "set") {
    const entries = `${bound} ${bound === 1 ? "entry" : "entries"}`;
    return small ? `needs at least ${entries}` : `may have at most ${entries}`;
  }
  // A number: the field's whole range says more than the one bound crossed (and an integer's
  // hidden bound, 2^53-1, is not one the reader set).
  const shown = form();
  if (shown) return `expected ${shown}`;
  return `must be ${small ? (exclusive ? "more than" : "at least") : exclusive ? "less than" : "at most"} ${bound}`;
}

function nounFor(type: string): string {
  const nouns: Record<string, string> = {
    string: "text",
    number: "a number",
    int: "an integer",
    boolean: "true or false",
    array: "a list",
    object: "a mapping",
    record: "a mapping",
    null: "null",
  };
  return nouns[type] ?? `a value of type ${type}`;
}

function formatNoun(format: string): string {
  const nouns: Record<string, string> = {
    url: "a URL",
    email: "an email address",
    uuid: "a UUID",
    ipv4: "an IPv4 address",
    ipv6: "an IPv6 address",
    datetime: "a date and time (ISO 8601)",
    starts_with: "text with the right start",
    ends_with: "text with the right end",
    includes: "text with the right part in it",
  };
  return nouns[format] ?? `text in ${format} form`;
}

function oneOf(values: readonly unknown[]): string {
  const shown = values.map((v) => JSON.stringify(v));
  if (shown.length <= 1) return shown[0] ?? "nothing (no value is allowed)";
  return `${shown.slice(0, -1).join(", ")} or ${shown.at(-1)}`;
}
