import { once } from "node:events";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { openAIError } from "../lib/openai-error.ts";
import { endToEnd } from "./hop-headers.ts";
import type { Backend } from "./model-route.ts";

export type ForwardOutcome =
  | { kind: "answered"; status: number }
  /** Nothing reached the engine's HTTP layer or came back: safe to send the request elsewhere. */
  | { kind: "unreachable"; error: Error }
  /** The engine answered, then the response broke off. */
  | { kind: "broken"; status: number; error: Error }
  | { kind: "aborted" };

const connectionErrors = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
  "EHOSTUNREACH",
]);

/**
 * Sends the request to the engine and streams the answer back untouched:
 * headers as they come, body chunk by chunk with backpressure, and a client
 * that goes away cancels the engine's request.
 */
export async function forward(
  req: IncomingMessage,
  res: ServerResponse,
  backend: Backend,
  body: Buffer,
  extraHeaders: OutgoingHttpHeaders,
  onResponse: () => void,
): Promise<ForwardOutcome> {
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort();
  };
  res.once("close", onClose);
  let status = 0;
  try {
    const upstream = await backend.pool.request({
      path: req.url!,
      method: req.method as "POST",
      headers: { ...endToEnd(req.headers), ...extraHeaders, "content-length": String(body.length) } as Record<
        string,
        string
      >,
      body: body.length > 0 ? body : undefined,
      signal: abort.signal,
    });
    status = upstream.statusCode;
    onResponse();
    if (res.headersSent) {
      // Hold progress already answered 200 and opened an SSE stream: an engine error can
      // only be told as an event in it.
      if (status !== 200) {
        const text = await upstream.body.text();
        res.end(`data: ${text.replaceAll("\n", " ")}\n\ndata: [DONE]\n\n`);
        return { kind: "answered", status };
      }
    } else {
      const headers = endToEnd(upstream.headers);
      const length = upstream.headers["content-length"];
      if (typeof length === "string") {
        // A sized body is passed on untouched, so its length stays true: keeping it saves the
        // chunked framing, and headers and body leave in one write instead of three.
        headers["content-length"] = length;
      }
      res.writeHead(status, headers);
      // A stream (no length) shows its headers at once, as the engine sent them.
      if (typeof length !== "string") res.flushHeaders();
    }
    try {
      // A hand-written pump rather than pipeline(): on an engine failure the client
      // response must stay open long enough to receive a final error event.
      for await (const chunk of upstream.body) {
        if (!res.write(chunk)) await once(res, "drain", { signal: abort.signal });
      }
      res.end();
    } catch (error) {
      if (abort.signal.aborted) return { kind: "aborted" };
      endBroken(res, String(upstream.headers["content-type"] ?? ""), error as Error);
      return { kind: "broken", status, error: error as Error };
    }
    return { kind: "answered", status };
  } catch (error) {
    if (abort.signal.aborted) return { kind: "aborted" };
    const code = (error as { code?: string }).code ?? "";
    if (status === 0 && connectionErrors.has(code)) return { kind: "unreachable", error: error as Error };
    return { kind: "broken", status, error: error as Error };
  } finally {
    res.off("close", onClose);
  }
}

/** An SSE client gets a final error event it can show; anything else sees the connection end early. */
function endBroken(res: ServerResponse, contentType: string, error: Error): void {
  if (res.writableEnded || res.destroyed) return;
  if (contentType.includes("text/event-stream")) {
    const body = openAIError(
      `The engine stopped in the middle of the response: ${error.message}`,
      "server_error",
      "upstream_broken",
    );
    res.end(`data: ${JSON.stringify(body)}\n\ndata: [DONE]\n\n`);
  } else {
    res.destroy(error);
  }
}
