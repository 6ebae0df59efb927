import { Writable } from "node:stream";
import { expect, test } from "vitest";
import { boundedWriter } from "./bounded-writer.ts";

/** A stream whose reader takes nothing until `release()`: its writes queue in Node, as stderr's do. */
function stalled() {
  const taken: string[] = [];
  let pending: (() => void)[] = [];
  const stream = new Writable({
    decodeStrings: false,
    highWaterMark: 16,
    write(chunk, _encoding, done) {
      pending.push(() => {
        taken.push(String(chunk));
        done();
      });
    },
  });
  const release = async () => {
    while (pending.length > 0) {
      const now = pending;
      pending = [];
      for (const take of now) take();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  return { stream, taken, release };
}

test("lines that come while the stream holds its most are dropped, counted, and said once it drains, before the lines after", async () => {
  const { stream, taken, release } = stalled();
  const write = boundedWriter(stream, 30, (count) => `dropped ${count}\n`);
  for (let i = 0; i < 10; i++) write(`line ${i}\n`);
  // 7 characters a line: five fill the 30 the queue may hold (the first is written at once).
  expect(stream.writableLength).toBeLessThanOrEqual(30 + 7);
  await release();
  write("after\n");
  await release();
  expect(taken).toEqual([
    "line 0\n",
    "line 1\n",
    "line 2\n",
    "line 3\n",
    "line 4\n",
    "dropped 5\n",
    "after\n",
  ]);
});

test("a stream that keeps up loses nothing; a destroyed one takes nothing and is not waited on", async () => {
  const lines: string[] = [];
  const fast = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const write = boundedWriter(fast, 10, (count) => `dropped ${count}\n`);
  for (let i = 0; i < 100; i++) write(`line ${i}\n`);
  expect(lines).toHaveLength(100);
  const gone = new Writable({ write: (_chunk, _encoding, done) => done() });
  gone.on("error", () => {});
  gone.destroy();
  const toGone = boundedWriter(gone, 10, () => "dropped\n");
  expect(() => toGone("line\n")).not.toThrow();
  expect(gone.listenerCount("drain")).toBe(0);
});
