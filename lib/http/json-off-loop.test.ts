import { expect, test } from "vitest";
import { readJsonBody, routingView } from "./json-body.ts";
import { offLoopBytes, readJsonBodyOffLoop } from "./json-off-loop.ts";

/** A request body of `bytes` or more: a prompt padded with many small objects, slow to parse. */
const large = (head: string, bytes = offLoopBytes) =>
  Buffer.from(
    `{${head}"messages":[${Array(Math.ceil(bytes / 3))
      .fill("{}")
      .join(",")}]}`,
  );

test("a large body is parsed on a worker thread: the event loop turns while it is parsed", async () => {
  let turned = false;
  setImmediate(() => {
    turned = true;
  });
  const read = await readJsonBodyOffLoop(large('"model":"qwen","stream":true,'));
  expect(turned).toBe(true);
  expect(read.parsed).toEqual({ model: "qwen", stream: true });
});

test("off the loop too, NaN and Infinity (Python's JSON, vLLM's parser) read as null", async () => {
  const read = await readJsonBodyOffLoop(large('"model":"qwen","temperature":NaN,"top_p":-Infinity,'));
  expect(read.parsed).toEqual({ model: "qwen" });
  expect(read.invalid).toBeUndefined();
});

test("a small body is parsed at once, as before", async () => {
  let turned = false;
  setImmediate(() => {
    turned = true;
  });
  const read = await readJsonBodyOffLoop(Buffer.from('{"model":"qwen"}'));
  expect(turned).toBe(false);
  expect(read.parsed).toEqual({ model: "qwen" });
});

test("off the loop, routing reads what it reads on it: kinds, members, invalid JSON, other encodings", async () => {
  const bodies = [
    large('"model":{"name":"qwen"},"stream":"true",'),
    large('"model":["qwen"],'),
    Buffer.from(`[${large("").toString()}]`),
    Buffer.from(`${large('"model":"qwen",').toString()},`),
    Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), large('"model":"qwen",')]),
    Buffer.from(`\ufeff${large('"model":"qwen",').toString()}`, "utf16le"),
  ];
  for (const body of bodies) {
    const here = readJsonBody(body);
    const there = await readJsonBodyOffLoop(body);
    expect(there.parsed).toEqual(routingView(here.parsed));
    expect(there.invalid?.message).toBe(here.invalid?.message);
    expect(there.sent.equals(here.sent)).toBe(true);
  }
  expect((await readJsonBodyOffLoop(bodies[0]!)).parsed).toEqual({ model: {}, stream: "true" });
  expect((await readJsonBodyOffLoop(bodies[2]!)).parsed).toEqual([]);
  expect((await readJsonBodyOffLoop(bodies[3]!)).invalid).toBeInstanceOf(SyntaxError);
});

test("bodies parsed together each get their own answer", async () => {
  const names = ["a", "b", "c", "d"];
  const reads = await Promise.all(names.map((name) => readJsonBodyOffLoop(large(`"model":"${name}",`))));
  expect(reads.map((r) => (r.parsed as { model: string }).model)).toEqual(names);
});
