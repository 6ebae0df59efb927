/**
 * A request body's fields as vLLM's pydantic models read them, shared by its OpenAI routes: the
 * body must be a JSON object, and each field's type is checked where it is given (null counts as
 * absent), every failure collected to be told at once (`schemaError`).
 */
import { parseAsPython } from "../../lib/http/python-json.ts";
import { laxBool } from "../../lib/lax-bool.ts";
import { laxFloat } from "./lax-float.ts";
import { laxInt } from "./lax-int.ts";
import { type SchemaIssue, schemaError } from "./vllm-error.ts";

export interface RequestFields {
  fields: Record<string, unknown>;
  issues: SchemaIssue[];
  /** Records an issue when field `name` is given and `ok` refuses it. */
  check(name: string, ok: (value: unknown) => boolean, type: string, msg: string): void;
  /** A boolean read as pydantic's lax mode does: `"true"`, `1`, `"yes"` are true (lib/lax-bool.ts). */
  checkBool(name: string): void;
  /**
   * An integer read as pydantic's lax mode does (lax-int.ts); a string or float it takes is stored
   * as the integer. `range`: the field's `ge`/`le` constraints, as pydantic words a value past them.
   */
  checkInt(name: string, range?: { ge: bigint; le: bigint }): void;
  /** A float read as pydantic's lax mode does (lax-float.ts); a string it takes is stored as the number. */
  checkFloat(name: string): void;
}

/** Parses `rawBody` as a JSON object, else throws the schema error vLLM answers with. */
export function requestFields(rawBody: string): RequestFields {
  let body: unknown;
  // Python reads a number written with a fraction or an exponent as a float, which pydantic takes
  // as an integer only within 64 bits; JSON.parse loses how it was written, so note it here.
  const floatLiterals = new WeakMap<object, Set<string>>();
  // `NaN` and `Infinity`, which Python's parser takes, read as absent: no answer of the simulator
  // depends on a sampling value.
  try {
    body = parseAsPython(
      rawBody,
      function (this: object, key: string, value: unknown, context?: { source?: string }) {
        if (typeof value === "number" && /[.eE]/.test(context?.source ?? "")) {
          const keys = floatLiterals.get(this) ?? new Set<string>();
          keys.add(key);
          floatLiterals.set(this, keys);
        }
        return value;
      },
    );
  } catch {
    throw schemaError([{ type: "json_invalid", loc: "body.0", msg: "JSON decode error", input: {} }]);
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw schemaError([
      {
        type: "model_attributes_type",
        loc: "body",
        msg: "Input should be a valid dictionary or object to extract fields from",
        input: body,
      },
    ]);
  const fields = body as Record<string, unknown>;
  const issues: SchemaIssue[] = [];
  const check = (name: string, ok: (value: unknown) => boolean, type: string, msg: string) => {
    const value = fields[name];
    if (value !== undefined && value !== null && !ok(value))
      issues.push({ type, loc: `body.${name}`, msg, input: value });
  };
  const checkBool = (name: string) => {
    const issue = boolIssue(fields[name], `body.${name}`);
    if (issue) issues.push(issue);
  };
  const writtenAsFloat = floatLiterals.get(fields) ?? new Set<string>();
  const checkInt = (name: string, range?: { ge: bigint; le: bigint }) => {
    const value = fields[name];
    if (value === undefined || value === null) return;
    const read = laxInt(value, writtenAsFloat.has(name));
    if (!read.ok) {
      issues.push({ type: read.type, loc: `body.${name}`, msg: read.msg, input: value });
      return;
    }
    fields[name] = read.value;
    if (range && BigInt(read.value) < range.ge)
      issues.push({
        type: "greater_than_equal",
        loc: `body.${name}`,
        msg: `Input should be greater than or equal to ${range.ge}`,
        input: value,
        ctx: `{'ge': ${range.ge}}`,
      });
    else if (range && BigInt(read.value) > range.le)
      issues.push({
        type: "less_than_equal",
        loc: `body.${name}`,
        msg: `Input should be less than or equal to ${range.le}`,
        input: value,
        ctx: `{'le': ${range.le}}`,
      });
  };
  const checkFloat = (name: string) => {
    const value = fields[name];
    if (value === undefined || value === null) return;
    const read = laxFloat(value);
    if (read.ok) fields[name] = read.value;
    else issues.push({ type: read.type, loc: `body.${name}`, msg: read.msg, input: value });
  };
  return { fields, issues, check, checkBool, checkInt, checkFloat };
}

/**
 * The issue pydantic's lax mode finds in a boolean at `loc` (a nested one too), if any: a string
 * or number it cannot read is `bool_parsing`, any other non-boolean `bool_type`; null is absent.
 */
export function boolIssue(value: unknown, loc: string): SchemaIssue | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string" || typeof value === "number")
    return laxBool(value) === undefined
      ? {
          type: "bool_parsing",
          loc,
          msg: "Input should be a valid boolean, unable to interpret input",
          input: value,
        }
      : undefined;
  return typeof value === "boolean"
    ? undefined
    : { type: "bool_type", loc, msg: "Input should be a valid boolean", input: value };
}
