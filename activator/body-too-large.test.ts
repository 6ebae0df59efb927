import { afterEach, expect, test } from "vitest";
import {
  finalBody,
  finalStatus,
  rawRequest,
  startActivator,
  type TestActivator,
} from "../test/abuse/harness.ts";

/** A body over what the activator reads: a 413 naming the size and the setting that sets it. */
let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

const body = JSON.stringify({ model: "m", prompt: "x".repeat(3_000) });
const declared = `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
const chunked =
  "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
const chunks = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;

test("a body over maxBodySize, declared or found while read, is a 413 naming its size and maxBodySize", async () => {
  // Found by an outside tester: "the request body is larger than the limit of 33554432 bytes" named
  // no setting to raise.
  snooze = await startActivator({ holdBudget: 5_000 }, { maxBodySize: 2_048 });
  for (const reply of [
    await rawRequest(snooze.port, declared, body),
    await rawRequest(snooze.port, chunked, chunks),
  ]) {
    expect(finalStatus(reply)).toBe(413);
    expect(finalBody(reply).error).toEqual({
      message:
        "The request body is larger than 2 KiB (2048 bytes): `maxBodySize`, the largest request body Snooze reads. Send a smaller body, or raise the setting.",
      type: "invalid_request_error",
      code: "request_too_large",
      param: null,
    });
  }
  expect(snooze.plane.demands).toEqual([]);
});

test("where maxHeldBytes is the smaller, the 413 names it instead", async () => {
  snooze = await startActivator({ holdBudget: 5_000 }, { maxBodySize: 1 << 20, maxHeldBytes: 1_536 });
  for (const reply of [
    await rawRequest(snooze.port, declared, body),
    await rawRequest(snooze.port, chunked, chunks),
  ]) {
    expect(finalStatus(reply)).toBe(413);
    expect(finalBody(reply).error.message).toBe(
      "The request body is larger than 1.5 KiB (1536 bytes): `maxHeldBytes`, the request body bytes Snooze keeps at once for all requests. Send a smaller body, or raise the setting.",
    );
  }
});
