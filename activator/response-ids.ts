import { clip } from "../lib/clip.ts";
import { keepNewest } from "../lib/keep-newest.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/**
 * Which model, and which of its replicas, answered each Responses API id, learned from the answers
 * the activator passes on: a stored response's retrieve and cancel (`GET /v1/responses/{id}`,
 * `POST …/cancel`) name no model, and only the engine that made a response has it (vLLM keeps them
 * in its memory, with `VLLM_ENABLE_RESPONSES_API_STORE=1`), not the model's other replicas; so does
 * a new response that continues one (`previous_response_id`). The id is in an answer's first bytes: a JSON response
 * begins `{"id":"resp_…"`, a stream's first event is `response.created`, whose `response` begins
 * the same. The most recent `limit` ids are kept; a request for an older one names its model in
 * the `snooze-model` header.
 */
export class ResponseIds {
  private readonly makers = new Map<string, Maker>();
  private readonly limit: number;

  constructor(limit = 10_000) {
    this.limit = limit;
  }

  /** The model and replica whose engine made response `id`, if it passed here. */
  makerOf(id: string): Maker | undefined {
    return this.makers.get(id);
  }

  /**
   * The engine a stored response's route goes to: the one that made response `id`, while it still
   * runs, awake or asleep (the response is in its memory: a stopped engine's went with it, and
   * starting one to hear so would cost a start). Only that replica has it: another replica of the
   * same model would answer a 404 of its own. `replicasOf`: a model's replicas now.
   */
  makerFor(
    id: string,
    replicasOf: (model: string) => readonly { id: string }[],
  ): { ok: true; maker: Maker } | { ok: false; error: OpenAIErrorBody } {
    const maker = this.makers.get(id);
    if (maker === undefined)
      return notFound(
        `Snooze did not pass on a response \`${clip(id)}\` (it remembers the last ${this.limit.toLocaleString("en-US")} it did), so it does not know which model's engine keeps it; name the model in the \`snooze-model\` header.`,
        "response_id",
      );
    if (!replicasOf(maker.model).some((replica) => replica.id === maker.replica))
      return { ok: false, error: makerGone(maker, id, "response_id") };
    return { ok: true, maker };
  }

  /**
   * The replica a new response that continues response `previous` (`previous_response_id`) must go
   * to, for `model`: the one whose engine keeps `previous`. Undefined when Snooze does not know it,
   * or another model made it: the engine decides (and answers 404 if it has none). An error when
   * that replica has stopped since: no replica of the model has it any more.
   */
  pinFor(
    previous: string,
    model: string,
    replicasOf: (model: string) => readonly { id: string }[],
  ): { ok: true; maker: Maker } | { ok: false; error: OpenAIErrorBody } | undefined {
    const maker = this.makers.get(previous);
    if (maker === undefined || maker.model !== model) return undefined;
    if (!replicasOf(model).some((replica) => replica.id === maker.replica))
      return { ok: false, error: makerGone(maker, previous, "previous_response_id") };
    return { ok: true, maker };
  }

  /** A model went (a reload removed it): its responses went with its engine. */
  forget(model: string): void {
    for (const [id, maker] of this.makers) if (maker.model === model) this.makers.delete(id);
  }

  /**
   * A tap for one `POST /v1/responses` answer from the engine of `maker`: reads the id from its
   * first bytes, then passes every call on to `next` (tracing's tap), untouched.
   */
  tap(maker: Maker, next?: AnswerTap): AnswerTap {
    let head = "";
    let done = false;
    return {
      response: (status, contentType) => {
        // Only a success carries a response; an error's body is no place to look.
        if (status >= 300) done = true;
        next?.response(status, contentType);
      },
      chunk: (chunk) => {
        if (!done) {
          head += chunk.toString("latin1", 0, Math.min(chunk.length, idWithin - head.length));
          const found = idPattern.exec(head);
          if (found) this.learn(found[1]!, maker);
          if (found || head.length >= idWithin) done = true;
        }
        next?.chunk(chunk);
      },
    };
  }

  private learn(id: string, maker: Maker): void {
    keepNewest(this.makers, id, maker, this.limit);
  }
}

/** The engine that made a response: its model, and which of the model's replicas. */
export interface Maker {
  model: string;
  replica: string;
}

const notFound = (message: string, param: string) => ({
  ok: false as const,
  error: openAIError(message, "invalid_request_error", "response_not_found", param),
});

/**
 * The 404 for response `id` once the replica that made it has stopped (a stop, `zeroAfter`, a
 * scale-in, a crash): the responses its engine kept went with it. `param`: the field that named it.
 */
export function makerGone(maker: Maker, id: string, param: "response_id" | "previous_response_id") {
  return openAIError(
    `The engine of \`${maker.model}\` that made response \`${clip(id)}\` (replica \`${clip(maker.replica)}\`) has stopped since, and the responses it kept went with it.`,
    "invalid_request_error",
    "response_not_found",
    param,
  );
}

/** What sees an engine's answer go by (the relay's `tap`). */
export interface AnswerTap {
  response(status: number, contentType: string): void;
  chunk(chunk: Buffer): void;
}

/** How far into an answer its id is looked for: it is the first field of the first object. */
const idWithin = 4096;
/** The first `"id"` of the answer: the response's (a stream's event type and sequence come around it). */
const idPattern = /"id"\s*:\s*"([A-Za-z0-9_.~-]{1,256})"/;
