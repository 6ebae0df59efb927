import type { IncomingHttpHeaders } from "node:http";

/** What an incoming CloudEvent asks of a model: `dev.snooze.model.wake|sleep|stop`. */
export type EventCommand =
  | { ok: true; verb: "wake" | "sleep" | "stop"; model: string }
  | { ok: false; message: string };

const verbs = new Set(["wake", "sleep", "stop"]);

/**
 * Reads a CloudEvent in structured (application/cloudevents+json) or binary
 * (ce-* headers) mode, e.g. from a Knative Trigger that wakes a model ahead of
 * traffic. The model is the event's subject, or `data.model`.
 */
export function parseEventCommand(headers: IncomingHttpHeaders, body: Buffer): EventCommand {
  let type: unknown;
  let subject: unknown;
  let data: unknown;
  try {
    if (String(headers["content-type"] ?? "").startsWith("application/cloudevents+json")) {
      const event = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      ({ type, subject, data } = event);
    } else {
      type = headers["ce-type"];
      subject = headers["ce-subject"];
      data = body.length > 0 ? JSON.parse(body.toString("utf8")) : undefined;
    }
  } catch (error) {
    return { ok: false, message: `the event is not valid JSON: ${(error as Error).message}` };
  }
  const verb =
    typeof type === "string" && type.startsWith("dev.snooze.model.")
      ? type.slice("dev.snooze.model.".length)
      : "";
  if (!verbs.has(verb)) {
    return {
      ok: false,
      message: `unsupported event type ${JSON.stringify(type)}; use dev.snooze.model.wake, .sleep or .stop`,
    };
  }
  const model =
    typeof subject === "string" && subject ? subject : (data as { model?: unknown } | undefined)?.model;
  if (typeof model !== "string" || !model)
    return { ok: false, message: "the event names no model: set its subject or data.model" };
  return { ok: true, verb: verb as "wake" | "sleep" | "stop", model };
}
