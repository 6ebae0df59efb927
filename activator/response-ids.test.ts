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

test("a stored response's route and a follow-up go to the replica that made it; told 404 once it is gone", () => {
  const ids = new ResponseIds();
  const tap = ids.tap(maker);
  tap.response(200, "application/json");
  tap.chunk(Buffer.from('{"id":"resp_1"}'));
  const both = () => [{ id: "qwen-1" }, { id: "qwen-2" }];
  expect(ids.makerFor("resp_1", both)).toEqual({ ok: true, maker });
  expect(ids.pinFor("resp_1", "qwen", both)).toEqual({ ok: true, maker });
  // Unknown, or another model's: the engine the request goes to decides.
  expect(ids.pinFor("resp_other", "qwen", both)).toBeUndefined();
  expect(ids.pinFor("resp_1", "llama", both)).toBeUndefined();
  const onlyTheOther = () => [{ id: "qwen-2" }];
  for (const [found, param] of [
    [ids.makerFor("resp_1", onlyTheOther), "response_id"],
    [ids.pinFor("resp_1", "qwen", onlyTheOther), "previous_response_id"],
  ] as const) {
    expect(found).toMatchObject({ ok: false, error: { error: { code: "response_not_found", param } } });
    expect(found?.ok === false && found.error.error.message).toMatch(/replica `qwen-1`\) has stopped since/);
  }
});
