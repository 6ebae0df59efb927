import type { IncomingHttpHeaders } from "node:http";
import { clip } from "../lib/clip.ts";
import { isJsonType } from "../lib/http/json.ts";
import { type JsonBody, readJsonBody } from "../lib/http/json-body.ts";
import { laxBool } from "../lib/lax-bool.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";
import { replaceModel } from "./replace-model.ts";
import { unknownModel } from "./unknown-model.ts";

export type Resolution =
  | {
      ok: true;
      model: string;
      /** The body to forward, rewritten when the client used an alias. */
      body: Buffer;
      /** The client asked for a streamed (SSE) answer. */
      stream: boolean;
      /**
       * A form body (`form`) whose `model` field must say this name instead (an alias): the
       * caller encodes the form again, which JSON bodies need not (`body` is rewritten).
       */
      renamed?: string;
      /** The name the client asked for (the header's, the body's `model`, or the Host label). */
      requested?: string;
      /** The `model` the body sent to the engine names, when it names one (the GenAI request model). */
      sent?: string;
      /** The JSON body's `previous_response_id` (a Responses API follow-up), when it is a string. */
      previousResponseId?: string;
    }
  | { ok: false; status: number; error: OpenAIErrorBody };

/** The fields of a multipart/form-data body that route it (an audio upload), read by the caller. */
export interface FormFields {
  model?: string;
  stream: boolean;
}

/**
 * Finds the model a request is for: the `snooze-model` header (set by a
 * gateway), else the JSON body's `model` field (or a form body's, `form`), else the first
 * label of `Host` (`qwen.models.example.com`). Aliases resolve to the model id, and the
 * body's `model` is rewritten to the name the engine serves: the model's `servedModel`
 * (`servedOf`) when it has one, else its id. A name of no model gets the 404 that lists `known`
 * (the models in the settings file's order, as `/v1/models` lists them; by default the ids of
 * `names`, in the order they were added).
 */
export function resolveModel(
  headers: IncomingHttpHeaders,
  body: Buffer,
  names: ReadonlyMap<string, string>,
  servedOf: (id: string) => string | undefined = () => undefined,
  form?: FormFields,
  known: () => Iterable<string> = () => names.values(),
  /** The body already read as JSON (`readJsonBodyOffLoop`, for a large one); else read here. */
  json?: JsonBody,
  /**
   * The model that made a response Snooze passed on (a Responses API request only): a follow-up
   * that names no model otherwise (OpenAI's SDKs let `model` be left out, and vLLM then serves it
   * with its own) is that model's, whose engine alone keeps the response it continues.
   */
  madeBy?: (responseId: string) => string | undefined,
): Resolution {
  const unknown = (name: string): Resolution => ({
    ok: false,
    status: 404,
    error: unknownModel(name, known(), names.keys()),
  });
  const isJson = isJsonType(headers["content-type"]);
  const read = body.length > 0 && isJson ? (json ?? readJsonBody(body)) : undefined;
  const parsed = read?.parsed;
  const invalid = read?.invalid;
  const sent = read?.sent ?? body;
  // As vLLM reads it (pydantic, lax): `"stream": "true"` streams too.
  const stream = form ? form.stream : laxBool((parsed as { stream?: unknown } | undefined)?.stream) === true;
  const requested = form ? form.model : (parsed as { model?: unknown } | null | undefined)?.model;
  const previous = (parsed as { previous_response_id?: unknown } | null | undefined)?.previous_response_id;
  const follows = typeof previous === "string" && previous !== "" ? { previousResponseId: previous } : {};
  /**
   * The request for model `id`, its body's `model` set to the name the engine serves when the
   * client wrote another name of the same model (an alias, or the id of a model served as another
   * name). A name of no model, or of another one, is left as written: the engine answers it.
   */
  const routed = (id: string, asked: string): Resolution => {
    const served = servedOf(id) ?? id;
    if (typeof requested !== "string" || requested === served || nameLookup(names, requested) !== id)
      return {
        ok: true,
        model: id,
        body: sent,
        stream,
        requested: asked,
        ...(typeof requested === "string" && requested ? { sent: requested } : {}),
        ...follows,
      };
    if (form) return { ok: true, model: id, body, stream, renamed: served, requested: asked, sent: served };
    const replaced = replaceModel(sent, served);
    return {
      ok: true,
      model: id,
      body: replaced ?? sent,
      stream,
      requested: asked,
      ...(replaced ? { sent: served } : { sent: requested }),
      ...follows,
    };
  };
  const header = utf8(headers["snooze-model"]);
  if (header) {
    const id = nameLookup(names, header);
    return id ? routed(id, header) : unknown(header);
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
      const id = nameLookup(names, requested);
      return id ? routed(id, requested) : unknown(requested);
    }
    if (requested !== undefined && typeof requested !== "string") {
      return {
        ok: false,
        status: 400,
        error: openAIError("`model` must be a string.", "invalid_request_error", "invalid_type", "model"),
      };
    }
  }
  if (form && typeof requested === "string" && requested) {
    const id = nameLookup(names, requested);
    return id ? routed(id, requested) : unknown(requested);
  }
  const host = String(headers.host ?? "").split(":")[0]!;
  const label = host.split(".")[0]!;
  // A name of one label counts as well: `http://qwen:8080/v1` is how a compose network or a short
  // Service name reaches it.
  const byHost = label ? hostLookup(names, label) : undefined;
  if (byHost) return routed(byHost, label);
  const maker = follows.previousResponseId !== undefined ? madeBy?.(follows.previousResponseId) : undefined;
  if (maker !== undefined && requested === undefined) return routed(maker, maker);
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
  if (body.length > 0 && !isJson && !form) {
    // Most often `curl -d` without a Content-Type (it sends a form), or `fetch` with a string body
    // (text/plain): the engine would refuse it too. A 400, as for a body that names no model.
    const type = clip(String(headers["content-type"]));
    return {
      ok: false,
      status: 400,
      error: openAIError(
        `The request body is sent as \`${type}\`, not JSON: send it with \`Content-Type: application/json\` (curl: -H 'Content-Type: application/json'), or name the model in the \`snooze-model\` header.`,
        "invalid_request_error",
        "unsupported_media_type",
        "content-type",
      ),
    };
  }
  // `"model": ""` is not "no model" to the client who wrote it (found by an outside tester: told
  // to set `model`, which it had); vLLM alone would serve it with its one model, Snooze has several.
  const message =
    requested === ""
      ? "The request's `model` is empty: set it to a model's id or alias (GET /v1/models lists them), or name the model in the `snooze-model` header or by its host name."
      : "The request names no model: set `model` in the JSON body, the `snooze-model` header, or use the model's host name.";
  return {
    ok: false,
    status: 400,
    error: openAIError(message, "invalid_request_error", "missing_model", "model"),
  };
}

/**
 * The model `name` names. The same text may come in another Unicode form than the config's (`café`
 * as e + U+0301 from a macOS client, NFD, against NFC in the file): it names the same model (the
 * loader refuses two names that differ only so). Normalised only on a miss: the hot path is one get.
 */
export function nameLookup(names: ReadonlyMap<string, string>, name: string): string | undefined {
  const id = names.get(name);
  if (id !== undefined) return id;
  const nfc = name.normalize("NFC");
  const nfd = name.normalize("NFD");
  return (nfc !== name ? names.get(nfc) : undefined) ?? (nfd !== name ? names.get(nfd) : undefined);
}

/**
 * The model a Host's first label names. Host names are case-insensitive: `Qwen.models.example` is
 * `qwen`'s, and `alpha2.models.example` is that of a model named `Alpha2` (found by an outside
 * tester: only the label was lowered, so a name with capitals was never reached by Host). The
 * settings refuse names of two models that differ only in case; should two such names come anyway
 * (Kubernetes Models are not checked against each other), a label they both match names neither.
 * The names are searched only when the label, as written and lowered, is no name: the hot path is
 * one or two gets.
 */
function hostLookup(names: ReadonlyMap<string, string>, label: string): string | undefined {
  const lower = label.toLowerCase();
  const id = names.get(label) ?? names.get(lower);
  if (id !== undefined) return id;
  let found: string | undefined;
  for (const [name, owner] of names) {
    if (name.toLowerCase() !== lower) continue;
    if (found !== undefined && found !== owner) return undefined;
    found = owner;
  }
  return found;
}

/**
 * A header as the client wrote it: Node.js reads header bytes as Latin-1, so a UTF-8 name (an
 * alias like `café`) arrives as `cafÃ©` unless its bytes are read again as UTF-8.
 */
function utf8(value: string | string[] | undefined): string | undefined {
  if (typeof value !== "string" || !value) return undefined;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range, on purpose
  return /^[\x00-\x7f]*$/.test(value) ? value : Buffer.from(value, "latin1").toString("utf8");
}
