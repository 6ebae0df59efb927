import { OffLoopWorker } from "../off-loop-worker.ts";
import { type JsonBody, readJsonBody } from "./json-body.ts";
import { jsonText } from "./json-encoding.ts";

/**
 * From this size on a JSON body is parsed on a worker thread. `JSON.parse` holds the event loop for
 * as long as it takes, and a body shaped to be slow (30 MB of `[{},{},…]`, within the default
 * maxBodySize) took 3.5 s and 1.2 GB: every client of the activator, `/healthz` included, waited
 * (found by an outside tester). Below it a body parses within a few milliseconds whatever its
 * shape, less than the trip to a worker and back saves.
 */
export const offLoopBytes = 256 * 1024;

type Answer = { parsed?: unknown; invalid?: string };

/** One worker, started with the first large body and kept for the next. */
const parser = new OffLoopWorker<string, Answer>(new URL("./json-worker.ts", import.meta.url), {
  keep: true,
});

/**
 * `readJsonBody`, with a body of `offLoopBytes` or more parsed on a worker thread, so the event loop
 * goes on serving everyone else meanwhile.
 */
export async function readJsonBodyOffLoop(body: Buffer): Promise<JsonBody> {
  if (body.length < offLoopBytes) return readJsonBody(body);
  const { text, utf8 } = jsonText(body);
  const sent = utf8 ? body : Buffer.from(text);
  const answer = await parser.ask(text);
  // A worker that failed, or could not start: parsed here.
  if (!answer) return readJsonBody(body);
  return answer.invalid !== undefined
    ? { invalid: new SyntaxError(answer.invalid), sent }
    : { parsed: answer.parsed, sent };
}
