import type { IncomingHttpHeaders } from "node:http";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

export type Resolution =
  | {
      ok: true;
      model: string;
      /** The body to forward, rewritten when the client used an alias. */
      body: Buffer;
      /** The client asked for a streamed (SSE) answer. */
      stream: boolean;
    }
  | { ok: false; status: number; error: OpenAIErrorBody };

/**
 * Finds the model a request is for: the `snooze-model` header (set by a
 * gateway), else the JSON body's `model` field, else the first label of
 * `Host` (`qwen.models.example.com`). Aliases resolve to the model id, and the
 * body's `model` is rewritten to the name the engine serves: the model's `servedModel`
 * (`servedOf`) when it has one, else its id.
 */
export function resolveModel(
  headers: IncomingHttpHeaders,
  body: Buffer,
  names: ReadonlyMap<string, string>,
  servedOf: (id: string) => string | undefined = () => undefined,
): Resolution {
  const unknown = (name: string): Resolution => ({
    ok: false,
    status: 404,
    error: openAIError(
      `The model \`${name}\` does not exist. Known models: ${[...new Set(names.values())].join(", ")}.`,
      "invalid_request_error",
      "model_not_found",
      "model",
    ),
  });
  const isJson = String(headers["content-type"] ?? "application/json").includes("json");
  let parsed: unknown;
  let invalid: Error | undefined;
  if (body.length > 0 && isJson) {
    try {
      parsed = JSON.parse(body.toString("utf8"));
    } catch (error) {
      invalid = error as Error;
    }
  }
  const stream = (parsed as { stream?: unknown } | undefined)?.stream === true;
  const requested = (parsed as { model?: unknown } | null | undefined)?.model;
  /**
   * The request for model `id`, its body's `model` set to the name the engine serves when the
   * client wrote another name of the same model (an alias, or the id of a model served as another
   * name). A name of no model, or of another one, is left as written: the engine answers it.
   */
  const routed = (id: string): Resolution => {
    const served = servedOf(id) ?? id;
    if (typeof requested !== "string" || requested === served || names.get(requested) !== id)
      return { ok: true, model: id, body, stream };
    (parsed as { model: string }).model = served;
    return { ok: true, model: id, body: Buffer.from(JSON.stringify(parsed)), stream };
  };
  const header = headers["snooze-model"];
  if (typeof header === "string" && header) {
    const id = names.get(header);
    return id ? routed(id) : unknown(header);
  }
  if (body.length > 0 && isJson) {
    if (invalid) {
      return {
        ok: false,
        status: 400,
        error: openAIError(
          `The body is not valid JSON: ${invalid.message}`,
          "invalid_request_error",
          "invalid_json",
        ),
      };
    }
    if (typeof requested === "string" && requested) {
      const id = names.get(requested);
      return id ? routed(id) : unknown(requested);
    }
    if (requested !== undefined && typeof requested !== "string") {
      return {
        ok: false,
        status: 400,
        error: openAIError("`model` must be a string.", "invalid_request_error", "invalid_type", "model"),
      };
    }
  }
  const host = String(headers.host ?? "").split(":")[0]!;
  const label = host.split(".")[0]!;
  const byHost = host.includes(".") ? names.get(label) : undefined;
  if (byHost) return routed(byHost);
  // Valid JSON that cannot hold a `model` (an array, a string, null): say so, not "no model".
  if (parsed !== undefined && (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))) {
    const kind = parsed === null ? "null" : Array.isArray(parsed) ? "an array" : `a ${typeof parsed}`;
    return {
      ok: false,
      status: 400,
      error: openAIError(
        `The body is JSON but ${kind}: an OpenAI request is a JSON object with a \`model\` field.`,
        "invalid_request_error",
        "invalid_type",
      ),
    };
  }
  return {
    ok: false,
    status: 400,
    error: openAIError(
      "The request names no model: set `model` in the JSON body, the `snooze-model` header, or use the model's host name.",
      "invalid_request_error",
      "missing_model",
      "model",
    ),
  };
}
