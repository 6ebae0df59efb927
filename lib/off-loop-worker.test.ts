import { expect, test } from "vitest";
import { OffLoopTimeout, OffLoopWorker } from "./off-loop-worker.ts";

/** A worker script that answers a number of milliseconds by holding its thread that long. */
const sleeper = new URL(
  `data:text/javascript,${encodeURIComponent(`
    import { answerOffLoop } from ${JSON.stringify(new URL("./off-loop-worker.ts", import.meta.url).href)};
    answerOffLoop((ms) => { const end = Date.now() + ms; while (Date.now() < end); return ms; });
  `)}`,
);

test("a question past its time limit rejects, its worker is ended, and the next question gets a new one", async () => {
  const worker = new OffLoopWorker<number, number>(sleeper, { keep: true });
  const other = worker.ask(60_000);
  await expect(worker.ask(60_000, { timeoutMs: 200 })).rejects.toBeInstanceOf(OffLoopTimeout);
  // The other question on the ended worker has no answer: its caller does the work itself.
  expect(await other).toBeUndefined();
  expect(await worker.ask(5)).toBe(5);
});

test("a worker not kept ends once it has no question left; the next question starts another", async () => {
  const worker = new OffLoopWorker<number, number>(sleeper, { keep: false });
  expect(await Promise.all([worker.ask(50), worker.ask(1)])).toEqual([50, 1]);
  expect(await worker.ask(2, { timeoutMs: 10_000 })).toBe(2);
});
