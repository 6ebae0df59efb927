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
  return describe(json);
}

function describe(json: Record<string, unknown>): string | undefined {
  const branches = (json.anyOf ?? json.oneOf) as Record<string, unknown>[] | undefined;
  if (Array.isArray(branches)) {
    const values = branches.flatMap((b) =>
      Array.isArray(b.enum) ? b.enum : "const" in b ? [b.const] : [],
    ) as unknown[];
    if (values.length === branches.length) return oneOf(values);
    const parts = branches.map(describe).filter((p): p is string => p !== undefined);
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
      if (min) return `${noun} of at least ${json.minimum}`;
      if (max) return `${noun} of at most ${json.maximum}`;
      return noun;
    }
    case "string":
      return typeof json.description === "string" ? `a string: ${json.description}` : "a string";
    case "array":
      return "a list";
    case "object":
      return "an object";
    default:
      return undefined;
  }
}

function oneOf(values: unknown[]): string {
  const shown = values.map((v) => JSON.stringify(v));
  if (shown.length === 1) return shown[0]!;
  return `${shown.slice(0, -1).join(", ")} or ${shown.at(-1)}`;
}
