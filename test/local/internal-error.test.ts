/**
 * A defect in a handler (a throw no route expected) is answered 500 `internal_error` and said in
 * the log with its stack; the process goes on serving. Found by an outside tester: the last-resort
 * handler logged nothing, and a throw of its own would have ended the process.
 */
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { createLogger } from "../../lib/log.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

test("a handler's throw is a 500 internal_error, logged with its stack, and the next request is served", async () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({}, (line) => lines.push(JSON.parse(line)));
  snooze = await startWith(`models:\n  qwen:\n    command: ${simCommand()}\n`, log);
  // The defect, injected where only the listing looks (the stats ticker reads the routes too): the
  // read of the model's back-off throws, once.
  const route = snooze.activator.routes.get("qwen")!;
  const backoff = route.backoff.bind(route);
  let broken = true;
  route.backoff = () => {
    if (!broken) return backoff();
    broken = false;
    throw new Error("a defect for the test");
  };
  const failed = await fetch(`${snooze.url}/v1/models`);
  expect(failed.status).toBe(500);
  expect(await failed.json()).toMatchObject({
    error: { code: "internal_error", type: "server_error", message: "Internal error: a defect for the test" },
  });
  const said = lines.find((line) => line.msg === "internal error answering a request");
  expect(said).toMatchObject({ level: "error", method: "GET" });
  expect(JSON.stringify(said)).toContain("a defect for the test");
  const next = await fetch(`${snooze.url}/v1/models`);
  expect(next.status).toBe(200);
});
