import type { ServerResponse } from "node:http";

/**
 * Ends an SSE stream with one last event and the `[DONE]` that OpenAI clients stop at: how an
 * error is told once the stream's 200 has gone out. An event's data must be one line here, so line
 * breaks in `data` (an engine's pretty-printed error) become spaces. A stream already ended or cut
 * is left alone.
 */
export function endWithEvent(res: ServerResponse, data: string): void {
  if (res.writableEnded || res.destroyed) return;
  res.end(`data: ${data.replaceAll("\n", " ")}\n\ndata: [DONE]\n\n`);
}
