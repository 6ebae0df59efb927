import { expect, test } from "vitest";
import { ResponseIds } from "./response-ids.ts";

const maker = { model: "qwen", replica: "qwen-1" };

test("the id of a JSON answer and of a stream's first event, even split across reads", () => {
  const ids = new ResponseIds();
  const json = ids.tap(maker);
  json.response(200, "application/json");
  json.chunk(Buffer.from('{"id":"resp_'));
  json.chunk(Buffer.from('abc","created_at":1}'));
  expect(ids.makerOf("resp_abc")).toEqual(maker);
  const stream = ids.tap({ model: "llama", replica: "llama-3" });
  stream.response(200, "text/event-stream");
  stream.chunk(
    Buffer.from('event: response.created\ndata: {"response":{"id":"resp_s","output":[{"id":"msg_1"}]}}\n\n'),
  );
  expect(ids.makerOf("resp_s")).toEqual({ model: "llama", replica: "llama-3" });
  expect(ids.makerOf("msg_1")).toBeUndefined();
});

test("an error answer teaches nothing; every call reaches the tap behind it", () => {
  const ids = new ResponseIds();
  const seen: string[] = [];
  const tap = ids.tap(maker, {
    response: (status) => seen.push(`response ${status}`),
    chunk: (chunk) => seen.push(chunk.toString()),
  });
  tap.response(400, "application/json");
  tap.chunk(Buffer.from('{"id":"resp_no"}'));
  expect(ids.makerOf("resp_no")).toBeUndefined();
  expect(seen).toEqual(["response 400", '{"id":"resp_no"}']);
});

test("only the last `limit` ids are kept, and a model's go when it goes", () => {
  const ids = new ResponseIds(2);
  for (const id of ["resp_1", "resp_2", "resp_3"]) {
    const tap = ids.tap(maker);
    tap.response(200, "application/json");
    tap.chunk(Buffer.from(`{"id":"${id}"}`));
  }
  expect(ids.makerOf("resp_1")).toBeUndefined();
  expect(ids.makerOf("resp_3")).toEqual(maker);
  ids.forget("qwen");
  expect(ids.makerOf("resp_3")).toBeUndefined();
});
