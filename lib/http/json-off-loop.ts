import { Worker } from "node:worker_threads";
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

let worker: Worker | undefined;
let nextId = 0;
/** The bodies sent to the worker, by id: each resolves with its answer, or undefined if the worker failed. */
const pending = new Map<number, (answer: Answer | undefined) => void>();

/** One worker, started with the first large body and kept, not keeping the process alive when idle. */
function parser(): Worker {
  if (worker) return worker;
  // No resourceLimits: a worker past its limit inside JSON.parse aborts the whole process (V8 cannot
  // stop it there), sooner than the process's own heap would (seen with a limit of 64 MB).
  const started = new Worker(new URL("./json-worker.ts", import.meta.url));
  started.unref();
  started.on("message", ({ id, ...answer }: Answer & { id: number }) => {
    pending.get(id)?.(answer);
    pending.delete(id);
  });
  // Should it fail, what it was parsing is parsed here instead, and the next body gets a new one.
  const ended = () => {
    if (worker === started) worker = undefined;
    for (const [id, waiting] of pending) {
      waiting(undefined);
      pending.delete(id);
    }
  };
  started.on("error", ended);
  started.on("exit", ended);
  worker = started;
  return started;
}

/**
 * `readJsonBody`, with a body of `offLoopBytes` or more parsed on a worker thread, so the event loop
 * goes on serving everyone else meanwhile.
 */
export async function readJsonBodyOffLoop(body: Buffer): Promise<JsonBody> {
  if (body.length < offLoopBytes) return readJsonBody(body);
  const { text, utf8 } = jsonText(body);
  const sent = utf8 ? body : Buffer.from(text);
  const id = nextId++;
  const answer = await new Promise<Answer | undefined>((resolve) => {
    pending.set(id, resolve);
    // Ref'd while a body waits on it: the process does not exit under a request.
    const thread = parser();
    thread.ref();
    thread.postMessage({ id, text });
  })
    // A worker that could not start: parsed here, as one that failed.
    .catch(() => undefined)
    .finally(() => {
      if (pending.size === 0) worker?.unref();
    });
  if (!answer) return readJsonBody(body);
  return answer.invalid !== undefined
    ? { invalid: new SyntaxError(answer.invalid), sent }
    : { parsed: answer.parsed, sent };
}
