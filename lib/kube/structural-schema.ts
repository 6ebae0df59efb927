import { z } from "zod";

/** An OpenAPI v3 schema as a CustomResourceDefinition carries it. */
export type JSONSchema = { [key: string]: unknown };

const maxSafe = Number.MAX_SAFE_INTEGER;

/**
 * A zod schema as a Kubernetes structural schema: zod 4's JSON Schema for the written (input) form,
 * then the changes the apiserver requires. Kubernetes prunes unknown fields itself, so
 * `additionalProperties: false` goes; a union of literals becomes one enum (every node needs a
 * `type`); zod's own bounds for "any safe integer" and its date-time regex (the `format` says it)
 * are dropped. Anything still not structural is an error here, not at `kubectl apply`.
 */
export function structuralSchema(schema: z.ZodType): JSONSchema {
  const json = z.toJSONSchema(schema, {
    io: "input",
    target: "openapi-3.0",
    unrepresentable: "throw",
  }) as JSONSchema;
  delete json.$schema;
  return clean(json, "");
}

function clean(node: JSONSchema, path: string): JSONSchema {
  const out: JSONSchema = {};
  if (Array.isArray(node.anyOf)) {
    Object.assign(out, literalUnion(node.anyOf as JSONSchema[], path));
  }
  for (const [key, value] of Object.entries(node)) {
    if (key === "anyOf") continue;
    if (key === "additionalProperties" && value === false) continue;
    if ((key === "minimum" && value === -maxSafe) || (key === "maximum" && value === maxSafe)) continue;
    if (key === "pattern" && node.format === "date-time") continue;
    if (key === "pattern" && typeof value === "string") {
      out.pattern = re2Pattern(value, path);
      continue;
    }
    if (key === "properties") {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JSONSchema>).map(([name, child]) => [
          name,
          clean(child, `${path}.${name}`),
        ]),
      );
    } else if (key === "items" || (key === "additionalProperties" && typeof value === "object")) {
      out[key] = clean(value as JSONSchema, `${path}[]`);
    } else {
      out[key] = value;
    }
  }
  if (out.type === undefined) throw new Error(`${path || "(root)"}: no type, not a structural schema`);
  // Description and type first: the order people read them in the YAML.
  const { description, type, ...rest } = out;
  return { ...(description !== undefined ? { description } : {}), type, ...rest };
}

/** `1 | 2` arrives as anyOf [{type:number, enum:[1]}, {type:number, enum:[2]}]. */
function literalUnion(branches: JSONSchema[], path: string): JSONSchema {
  const types = new Set(branches.map((b) => b.type));
  const values = branches.flatMap((b) => (Array.isArray(b.enum) ? b.enum : []));
  if (
    types.size !== 1 ||
    values.length !== branches.length ||
    branches.some((b) => Object.keys(b).length !== 2)
  ) {
    throw new Error(`${path}: only unions of literals of one type can become a structural schema`);
  }
  const type = [...types][0] === "number" && values.every(Number.isInteger) ? "integer" : [...types][0];
  return { type, enum: values };
}

/**
 * JavaScript's whitespace, which its `\s` matches: RE2's (the API server's patterns) is ASCII only
 * (`[\t\n\f\r ]`), so `^[^\s]+$` let a no-break space or an ideographic space through the CRD
 * that zod refuses. Code points in RE2's `\x{…}` form.
 */
const jsWhitespace =
  "\\t\\n\\v\\f\\r \\x{00a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}";

/** A zod (JavaScript) regex's source as RE2 reads it the same way: `\s` and `\S` spelled out. */
export function re2Pattern(source: string, path = ""): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i]!;
    if (c === "\\") {
      const next = source[i + 1] ?? "";
      i++;
      if (next === "s") out += inClass ? jsWhitespace : `[${jsWhitespace}]`;
      else if (next === "S" && !inClass) out += `[^${jsWhitespace}]`;
      else if (next === "S") throw new Error(`${path}: \\S inside a class has no RE2 form here`);
      else out += c + next;
      continue;
    }
    if (c === "[" && !inClass) inClass = true;
    else if (c === "]" && inClass) inClass = false;
    out += c;
  }
  return out;
}
