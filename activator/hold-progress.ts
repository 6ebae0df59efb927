import type { ServerResponse } from "node:http";
import { noteErrorCode } from "../lib/http/json.ts";
import { endWithEvent } from "../lib/http/sse.ts";
import { escapeLineBreakers } from "../lib/json-line.ts";
import type { OpenAIErrorBody } from "../lib/openai-error.ts";

const firstAfterMs = 1_000;
const everyMs = 2_000;

/**
 * For a streaming request held past a second (setting `streamProgress`): the
 * client gets its 200 and SSE comment lines saying what it waits for, which
 * OpenAI clients skip, instead of silence. Once this has started, failures can
 * only be told in the stream, as an SSE error event.
 */
export class HoldProgress {
  private readonly res: ServerResponse;
  private readonly describe: () => string;
  private readonly requestId?: () => string;
  private timer?: NodeJS.Timeout;

  /**
   * `describe` says what the request waits for, e.g. `waking qwen, ~2s`; `requestId` gives the
   * request the id its head says (`adoptRequestId`), the engine's answer coming too late for it.
   */
  constructor(res: ServerResponse, describe: () => string, requestId?: () => string) {
    this.res = res;
    this.describe = describe;
    if (requestId) this.requestId = requestId;
  }

  start(): void {
    this.timer = setTimeout(() => this.tick(), firstAfterMs);
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  /** Ends the stream with an error event, as the OpenAI API does mid-stream. */
  fail(error: OpenAIErrorBody): void {
    noteErrorCode(this.res, error);
    endWithEvent(this.res, escapeLineBreakers(JSON.stringify(error)));
  }

  private tick(): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    if (!this.res.headersSent) {
      this.res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        ...(this.requestId ? { "x-request-id": this.requestId() } : {}),
      });
    }
    this.res.write(`: ${this.describe()}\n\n`);
    this.timer = setTimeout(() => this.tick(), everyMs);
  }
}
