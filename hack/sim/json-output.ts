/**
 * Answers under `response_format` `json_object` or `json_schema`: vLLM constrains decoding so the
 * text is JSON (matching the schema), and clients parse it (the openai SDK's `parse` does).
 * The simulator writes a deterministic JSON value instead of prose: an instance of the schema
 * (every property, the first `enum`/`const`/`anyOf` branch, `$ref` followed), or a small object.
 * It is split into tokens that join back to the exact text, so `max_tokens` can cut it as it
 * cuts a real one (`finish_reason: "length"`, the JSON then incomplete).
 */
import type { PlannedOutput } from "./text.ts";

export type JsonFormat = { kind: "object" } | { kind: "schema"; schema: unknown };

const words = ["river", "stone", "light", "garden", "signal", "answer", "cloud", "window"];

/** The planned output for a JSON answer, `maxTokens` at most. */
export function planJson(format: JsonFormat, seed: number, maxTokens: number): PlannedOutput {
  const value =
    format.kind === "schema"
      ? instance(format.schema, format.schema, seed, 0)
      : { answer: words[seed % words.length], confidence: 0.5 };
  const tokens = jsonTokens(JSON.stringify(value));
  if (tokens.length <= maxTokens) return { tokens, finishReason: "stop" };
  return { tokens: tokens.slice(0, maxTokens), finishReason: "length" };
}

/** Text as tokens that join back to it: a word or a mark, each with the spaces before it. */
function jsonTokens(text: string): string[] {
  return text.match(/\s*[\p{L}\p{N}_]+|\s*[^\p{L}\p{N}_\s]|\s+/gu) ?? [];
}

type Schema = Record<string, unknown>;

/** A value that satisfies `schema` (the common subset of JSON Schema that clients send). */
function instance(schema: unknown, root: unknown, seed: number, depth: number): unknown {
  if (!schema || typeof schema !== "object" || depth > 8) return null;
  const s = schema as Schema;
  if (typeof s.$ref === "string") return instance(resolveRef(s.$ref, root), root, seed, depth + 1);
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const branches = s[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const branch = branches.find((b) => (b as Schema)?.type !== "null") ?? branches[0];
      return instance(branch, root, seed, depth + 1);
    }
  }
  const type = Array.isArray(s.type) ? (s.type.find((t) => t !== "null") ?? s.type[0]) : s.type;
  switch (type ?? (s.properties ? "object" : s.items ? "array" : undefined)) {
    case "object": {
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      return Object.fromEntries(
        Object.entries(properties).map(([name, sub], i) => [
          name,
          instance(sub, root, seed + i + 1, depth + 1),
        ]),
      );
    }
    case "array": {
      const count = Math.max(typeof s.minItems === "number" ? s.minItems : 1, 1);
      const limited = typeof s.maxItems === "number" ? Math.min(count, s.maxItems) : count;
      return Array.from({ length: limited }, (_, i) => instance(s.items, root, seed + i, depth + 1));
    }
    case "string":
      return stringFor(s, seed);
    case "integer":
      return typeof s.minimum === "number" ? Math.ceil(s.minimum) : seed % 10;
    case "number":
      return typeof s.minimum === "number" ? s.minimum : (seed % 10) + 0.5;
    case "boolean":
      return seed % 2 === 0;
    case "null":
      return null;
    default:
      return {};
  }
}

function stringFor(s: Schema, seed: number): string {
  if (s.format === "date-time") return "2025-01-01T00:00:00Z";
  if (s.format === "date") return "2025-01-01";
  if (s.format === "email") return "someone@example.com";
  if (s.format === "uri" || s.format === "url") return "https://example.com/";
  if (s.format === "uuid") return "00000000-0000-4000-8000-000000000000";
  const word = words[seed % words.length]!;
  const min = typeof s.minLength === "number" ? s.minLength : 0;
  const max = typeof s.maxLength === "number" ? s.maxLength : Number.POSITIVE_INFINITY;
  return word.padEnd(min, "s").slice(0, max);
}

/** A local `$ref` (`#/$defs/x`, `#/definitions/x`, `#`). */
function resolveRef(ref: string, root: unknown): unknown {
  if (!ref.startsWith("#")) return {};
  let node: unknown = root;
  for (const part of ref.slice(1).split("/").filter(Boolean)) {
    node = (node as Record<string, unknown> | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  }
  return node ?? {};
}

/**
 * A request's `response_format` as vLLM reads it: `text` or absent is free text; `json_object`
 * any JSON object; `json_schema` its `json_schema.schema`.
 */
export function jsonFormat(responseFormat: unknown): JsonFormat | undefined {
  if (!responseFormat || typeof responseFormat !== "object") return undefined;
  const { type, json_schema: jsonSchema } = responseFormat as { type?: unknown; json_schema?: unknown };
  if (type === "json_object") return { kind: "object" };
  if (type === "json_schema")
    return { kind: "schema", schema: (jsonSchema as { schema?: unknown })?.schema ?? {} };
  return undefined;
}
