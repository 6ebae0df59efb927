import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, test, vi } from "vitest";
import { createLogger } from "../lib/log.ts";
import { openAIError } from "../lib/openai-error.ts";
import type { AdminRefusal } from "./admin-guard.ts";
import type { SenderCheck } from "./event-senders.ts";
import { handleIncomingEvents, RecentEvents } from "./incoming-event.ts";

/**
 * A delivery whose sender is refused for its token is said in the activator's log, not only to the
 * sender: a PingSource reports its failed deliveries only in its adapter's log (found with a real
 * Knative Eventing in e2e, where the refusals were nowhere in Snooze's).
 */
let server: Server | undefined;
afterEach(() => server?.close());

/** The events endpoint, its admin actions recorded (`admin` replaces some), and one event to send. */
async function endpoint(
  sender?: SenderCheck,
  admin: Partial<Parameters<typeof handleIncomingEvents>[2]["admin"]> = {},
  type = "dev.snooze.model.wake",
) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({}, (line) => lines.push(JSON.parse(line)), "debug");
  const woken: string[] = [];
  const recent = new RecentEvents();
  server = createServer((req, res) => {
    void handleIncomingEvents(req, res, {
      admin: {
        wake: async (model) => void woken.push(model),
        prewarm: async (model) => {
          woken.push(model);
          return { keptMs: 0 };
        },
        sleep: async () => {},
        stop: async () => {},
        ...admin,
      },
      modelNamed: (name) => (name === "qwen" ? "qwen" : undefined),
      knownModels: () => ["qwen"],
      recent,
      log,
      ...(sender ? { sender } : {}),
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/snooze/v1/events`;
  const send = () =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({
        specversion: "1.0",
        id: "e-1",
        source: "/apis/v1/namespaces/team/pingsources/prewarm-qwen",
        type,
        subject: "qwen",
      }),
    });
  return { lines, woken, send };
}

const refusal = (status: number, code: string, message: string): AdminRefusal => ({
  status,
  body: openAIError(message, "permission_error", code),
});

describe("a refused event sender in the activator's log", () => {
  test("403: a warning with the reason, as the sender heard it; nothing is woken", async () => {
    const reason = "system:serviceaccount:team:prewarm-qwen may not wake models.snooze.dev team/qwen";
    const { lines, woken, send } = await endpoint({
      authenticate: async () => undefined,
      authorize: async () => refusal(403, "sender_not_allowed", reason),
    });
    const answer = await send();
    expect(answer.status).toBe(403);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: "warn",
        msg: "event sender refused",
        status: 403,
        code: "sender_not_allowed",
        reason,
      }),
    );
    expect(woken).toEqual([]);
  });

  test("503 (the API server could not be asked): a warning too", async () => {
    const { lines, send } = await endpoint({
      authenticate: async () => refusal(503, "sender_check_unavailable", "the API server did not answer"),
      authorize: async () => undefined,
    });
    expect((await send()).status).toBe(503);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: "warn", code: "sender_check_unavailable" }),
    );
  });

  test("401 (no sender's token at all): debug only, so strangers cannot fill the log", async () => {
    const { lines, send } = await endpoint({
      authenticate: async () => refusal(401, "invalid_sender_token", "not a token for snooze.dev/events"),
      authorize: async () => undefined,
    });
    expect((await send()).status).toBe(401);
    expect(lines).toContainEqual(expect.objectContaining({ level: "debug", code: "invalid_sender_token" }));
    expect(lines.filter((l) => l.level !== "debug")).toEqual([]);
  });
});

test("a redelivery that comes while the event's sleep is still under way waits for it, not acting again; a failed one may be tried again", async () => {
  // Found by an outside tester: a Broker that gave up waiting on a sleep draining for minutes sent
  // the event again, and the second copy asked the control plane for a second sleep.
  let finish!: (error?: Error) => void;
  const sleeps: string[] = [];
  const sleep = (model: string) => {
    sleeps.push(model);
    return new Promise<void>((resolve, reject) => {
      finish = (error) => (error ? reject(error) : resolve());
    });
  };
  const { lines, send } = await endpoint(undefined, { sleep }, "dev.snooze.model.sleep");
  const asked = () => lines.filter((line) => line.msg === "asked by an event").length;
  // The first delivery fails: the redelivery during it gets the same failure, and the next one acts.
  const [first, second] = [send(), send()];
  // Both deliveries taken (each logs what it asks) while the first one's sleep is under way.
  await vi.waitFor(() => expect(asked()).toBe(2));
  expect(sleeps).toHaveLength(1);
  finish(new Error("the engine did not answer"));
  expect((await first).status).toBe(500);
  expect((await second).status).toBe(500);
  const [third, fourth] = [send(), send()];
  await vi.waitFor(() => expect(asked()).toBe(4));
  expect(sleeps).toHaveLength(2);
  finish();
  expect((await third).status).toBe(200);
  expect((await fourth).status).toBe(200);
  expect(sleeps).toEqual(["qwen", "qwen"]);
  // Done: later copies are duplicates.
  const fifth = await send();
  expect(fifth.headers.get("snooze-event")).toBe("duplicate");
  expect(sleeps).toHaveLength(2);
});
