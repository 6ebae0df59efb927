import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

// vLLM serves a model under its Hugging Face id, a name with a slash. The admin API takes it as a
// person types it, as GET /v1/models/{model} does (found by an outside tester: `curl -X POST
// …/snooze/v1/models/org/tiny/stop` was "No route", only `org%2Ftiny` reached the model).
let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`models:\n  org/tiny:\n    command: ${simCommand()}\n`);
});
afterAll(() => snooze.close(1_000));

test("the admin API's routes take a model id with a slash, written or percent-encoded", async () => {
  for (const name of ["org/tiny", "org%2Ftiny"]) {
    const stopped = await fetch(`${snooze.url}/snooze/v1/models/${name}/stop`, { method: "POST" });
    expect([name, stopped.status]).toEqual([name, 200]);
    expect(await stopped.json()).toMatchObject({ model: "org/tiny", action: "stop", tier: "cold" });
    const logs = await fetch(`${snooze.url}/snooze/v1/models/${name}/logs`);
    expect([name, logs.status]).toEqual([name, 200]);
    expect(await logs.json()).toMatchObject({ model: "org/tiny" });
  }
  // Another method is still a 405 saying which, and a name no model has a 404 naming the models.
  const get = await fetch(`${snooze.url}/snooze/v1/models/org/tiny/stop`);
  expect(get.status).toBe(405);
  expect(get.headers.get("allow")).toBe("POST");
  const unknown = await fetch(`${snooze.url}/snooze/v1/models/org/other/stop`, { method: "POST" });
  expect(unknown.status).toBe(404);
  expect(((await unknown.json()) as any).error.message).toContain("Known models: `org/tiny`.");
});
