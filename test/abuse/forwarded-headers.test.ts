import type { IncomingHttpHeaders } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, expect, test } from "vitest";
import { httpEngine, rawRequest, startActivator, type TestActivator } from "./harness.ts";

/**
 * What an engine is told of the client. vLLM's server (uvicorn) trusts `X-Forwarded-For` from a
 * proxy at 127.0.0.1 by default, which is where `snooze serve` reaches its engines from, and names
 * the client by the last address in it that is not a trusted proxy's (its access log, its
 * `request.client`). Passed on as the client wrote it, a remote client named itself whatever it
 * liked there (found by an outside tester).
 */
let snooze: TestActivator;
let engine: Awaited<ReturnType<typeof httpEngine>>;
const seen: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  engine = await httpEngine((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          created: 1,
          model: "m",
          choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
        }),
      );
    });
  });
  snooze = await startActivator();
  snooze.plane.readyAt("m", engine.address);
});
afterAll(async () => {
  await snooze?.close();
  engine?.server.close();
  engine?.server.closeAllConnections();
});

const chat = (headers: Record<string, string>) =>
  new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "sk-client", maxRetries: 0 }).chat.completions.create(
    { model: "m", messages: [{ role: "user", content: "hi" }] },
    { headers },
  );

test("the client's address is added to X-Forwarded-For: the last entry is the peer Snooze saw", async () => {
  seen.length = 0;
  await chat({});
  await chat({ "X-Forwarded-For": "6.6.6.6" });
  await chat({ "X-Forwarded-For": "6.6.6.6, 7.7.7.7" });
  expect(seen.map((headers) => headers["x-forwarded-for"])).toEqual([
    "127.0.0.1",
    "6.6.6.6, 127.0.0.1",
    "6.6.6.6, 7.7.7.7, 127.0.0.1",
  ]);
  // The client's API key goes on: an engine started with --api-key checks it (docs/security.md).
  expect(seen.every((headers) => headers.authorization === "Bearer sk-client")).toBe(true);
});

test("several X-Forwarded-For headers are read as one list; one the Connection header names is dropped first", async () => {
  seen.length = 0;
  const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
  const post = (extra: string) =>
    rawRequest(
      snooze.port,
      `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n${extra}\r\n`,
      body,
    );
  await post("x-forwarded-for: 1.1.1.1\r\nx-forwarded-for: 2.2.2.2\r\nconnection: close\r\n");
  await post("x-forwarded-for: 1.1.1.1\r\nconnection: close, x-forwarded-for\r\n");
  expect(seen.map((headers) => headers["x-forwarded-for"])).toEqual([
    "1.1.1.1, 2.2.2.2, 127.0.0.1",
    "127.0.0.1",
  ]);
});
