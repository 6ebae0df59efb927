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
