import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { CloudEvent, HTTP } from "cloudevents";
import { afterEach, expect, test } from "vitest";
import { handleIncomingEvents, RecentEvents } from "./incoming-event.ts";

/**
 * A prewarm event is a prewarm whether or not it says for how long: one without `data.for` (a
 * PingSource's `snoozeaction: prewarm` with the data `{"model":"qwen"}`) was carried out as a wake,
 * which in a slot waits as a held request does and then drains a busy resident (found by an outside
 * tester: a prewarm swapped out a model serving a request, "waited past maxWait").
 */
let server: Server | undefined;
afterEach(() => server?.close());

async function endpoint() {
  const asked: string[] = [];
  server = createServer((req, res) => {
    void handleIncomingEvents(req, res, {
      admin: {
        wake: async (model) => void asked.push(`wake ${model}`),
        prewarm: async (model, forMs) => {
          asked.push(`prewarm ${model} ${forMs}`);
          return { keptMs: 0 };
        },
        sleep: async () => {},
        stop: async () => {},
      },
      modelNamed: (name) => (name === "qwen" ? "qwen" : undefined),
      knownModels: () => ["qwen"],
      recent: new RecentEvents(),
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/snooze/v1/events`;
  const send = async (event: CloudEvent<unknown>) => {
    const message = HTTP.binary(event);
    const response = await fetch(url, {
      method: "POST",
      headers: message.headers as Record<string, string>,
      body: message.body as string | undefined,
    });
    return response.status;
  };
  return { asked, send };
}

test("a prewarm without data.for is a prewarm that keeps the model no longer than its ladder would, not a wake", async () => {
  const { asked, send } = await endpoint();
  const source = "/apis/v1/namespaces/team/pingsources/prewarm-qwen";
  expect(await send(new CloudEvent({ type: "dev.snooze.model.prewarm", source, subject: "qwen" }))).toBe(202);
  expect(
    await send(
      new CloudEvent({
        type: "dev.knative.sources.ping",
        source,
        snoozeaction: "prewarm",
        datacontenttype: "application/json",
        data: { model: "qwen" },
      }),
    ),
  ).toBe(202);
  expect(
    await send(
      new CloudEvent({ type: "dev.snooze.model.prewarm", source, subject: "qwen", data: { for: "0s" } }),
    ),
  ).toBe(202);
  expect(
    await send(
      new CloudEvent({ type: "dev.snooze.model.prewarm", source, subject: "qwen", data: { for: "10m" } }),
    ),
  ).toBe(202);
  // A wake is still a wake.
  expect(await send(new CloudEvent({ type: "dev.snooze.model.wake", source, subject: "qwen" }))).toBe(202);
  expect(asked).toEqual([
    "prewarm qwen 0",
    "prewarm qwen 0",
    "prewarm qwen 0",
    "prewarm qwen 600000",
    "wake qwen",
  ]);
});
