import { type ChildProcess, spawn } from "node:child_process";
import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { startActivator, type TestActivator } from "../abuse/harness.ts";
import { until } from "../helpers/local-snooze.ts";

/**
 * A model with two replicas, each a `snooze sim` process with vLLM's response store: a stored
 * response lives in the memory of the engine that made it alone, so its retrieve, its cancel and a
 * follow-up (`previous_response_id`) go to that replica, even when the activator would send a new
 * request to the other one (the maker is the busier), and are told the response is gone once that
 * replica is, not answered by the other engine's own 404.
 */
let snooze: TestActivator | undefined;
const engines: ChildProcess[] = [];
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
  for (const engine of engines.splice(0)) engine.kill("SIGKILL");
});

/** A `snooze sim` process serving `m` with the response store on; resolves with its address once it answers. */
async function simEngine(): Promise<string> {
  const port = await freePort();
  const engine = spawn(
    process.execPath,
    ["bin/snooze.js", "sim", "--served-model-name", "m", "--port", String(port), "--itl", "100ms"],
    { stdio: "ignore", env: { ...process.env, VLLM_ENABLE_RESPONSES_API_STORE: "1" } },
  );
  engines.push(engine);
  const address = `127.0.0.1:${port}`;
  await until(
    () =>
      fetch(`http://${address}/health`).then(
        (r) => r.ok,
        () => false,
      ),
    20_000,
    "the sim",
  );
  return address;
}

/** What `promise` was rejected with; undefined if it was fulfilled. */
const rejection = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error,
  );

/** A long stream through the activator, taking a place on the replica it goes to until aborted. */
async function occupy(url: string): Promise<AbortController> {
  const leave = new AbortController();
  const stream = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 500,
      stream: true,
    }),
    signal: leave.signal,
  });
  expect(stream.status).toBe(200);
  return leave;
}

/**
 * The activator over two `snooze sim` replicas of `m`, `m-0` and `m-1`, both ready; an SDK client of
 * it; and the response `m-0` made while both were idle.
 */
async function twoReplicas(settings: Parameters<typeof startActivator>[0] = {}) {
  const [first, second] = await Promise.all([simEngine(), simEngine()]);
  snooze = await startActivator({ holdBudget: 10_000, ...settings });
  snooze.plane.emit({ model: "m", replica: "m-0", address: first!, tier: "ready", since: Date.now() });
  snooze.plane.emit({ model: "m", replica: "m-1", address: second!, tier: "ready", since: Date.now() });
  const sdk = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
  const made = await sdk.responses.create({ model: "m", input: "hi", max_output_tokens: 3 });
  return { snooze, sdk, made };
}

test("a stored response's routes and follow-ups go to the replica that made it, and say so when it is gone", async () => {
  // Both idle: the first replica makes it.
  const { snooze, sdk, made } = await twoReplicas();
  // A long stream keeps m-0 busy: a request for any replica now goes to m-1.
  const busy = await occupy(snooze!.url);
  try {
    expect(
      snooze.activator.routes
        .get("m")!
        .replicas()
        .map((r) => [r.id, r.inFlight]),
    ).toEqual([
      ["m-0", 1],
      ["m-1", 0],
    ]);
    expect((await sdk.responses.retrieve(made.id)).output_text).toBe(made.output_text);
    const next = await sdk.responses.create({
      model: "m",
      input: "and then?",
      previous_response_id: made.id,
      max_output_tokens: 3,
    });
    expect(next.previous_response_id).toBe(made.id);
    // A follow-up of the follow-up: made on m-0 as well, so found there.
    expect((await sdk.responses.retrieve(next.id)).id).toBe(next.id);
    await expect(sdk.responses.cancel(made.id)).rejects.toMatchObject({ status: 400 });
  } finally {
    busy.abort();
  }
  // m-0 stops: its responses went with it, whatever m-1 would say.
  snooze.plane.emit({ model: "m", replica: "m-0", tier: "cold", since: Date.now() });
  const gone = await rejection(sdk.responses.retrieve(made.id));
  expect(gone).toBeInstanceOf(OpenAI.NotFoundError);
  expect((gone as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
    code: "response_not_found",
    param: "response_id",
    message: expect.stringMatching(/replica `m-0`\) has stopped since/),
  });
  const follow = await rejection(
    sdk.responses.create({ model: "m", input: "more", previous_response_id: made.id }),
  );
  expect(follow).toBeInstanceOf(OpenAI.NotFoundError);
  expect((follow as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
    code: "response_not_found",
    param: "previous_response_id",
  });
  // Routes of a stored response vLLM does not serve: answered here, never by an engine.
  const deleted = await fetch(`${snooze.url}/v1/responses/${made.id}`, { method: "DELETE" });
  expect([deleted.status, deleted.headers.get("allow")]).toEqual([405, "GET"]);
  expect((await fetch(`${snooze.url}/v1/responses/${made.id}/input_items`)).status).toBe(404);
});

test("a follow-up held for its busy replica goes there once it has room, while other requests use the other replica; told 404 if the replica goes", async () => {
  const { snooze, sdk, made } = await twoReplicas({ concurrency: 1 });
  const busy = await occupy(snooze!.url);
  // m-0 takes one request at a time and has one: the follow-up waits for it.
  const next = sdk.responses.create({
    model: "m",
    input: "and?",
    previous_response_id: made.id,
    max_output_tokens: 3,
  });
  await until(() => snooze!.activator.routes.get("m")!.held === 1, 5_000, "the follow-up held");
  // Not in the way of the others: a new request goes to m-1 at once.
  const other = await sdk.responses.create({ model: "m", input: "hi", max_output_tokens: 3 });
  expect(other.id).toBeTruthy();
  busy.abort();
  expect((await next).previous_response_id).toBe(made.id);
  // Held for m-0 while it stops: a 404 at once, not the rest of the hold budget.
  const again = await occupy(snooze!.url);
  const held = fetch(`${snooze.url}/v1/responses/${made.id}`);
  await until(() => snooze!.activator.routes.get("m")!.held === 1, 5_000, "the retrieve held");
  snooze.plane.emit({ model: "m", replica: "m-0", tier: "cold", since: Date.now() });
  const answer = await held;
  again.abort();
  expect(answer.status).toBe(404);
  expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("response_not_found");
});

test("a follow-up that names no model goes to the model and replica that made the response it continues (found by an outside tester)", async () => {
  // OpenAI's SDKs let `model` be left out of a new response, and vLLM serves one without it; Snooze
  // answered 400 missing_model, though it knew which engine alone keeps the response.
  const { snooze, sdk, made } = await twoReplicas();
  // m-0 made it and is busy: a request naming the model alone would go to m-1, whose engine has none.
  const busy = await occupy(snooze.url);
  try {
    const next = await sdk.responses.create({
      input: "and then?",
      previous_response_id: made.id,
      max_output_tokens: 3,
    });
    expect([next.previous_response_id, next.model]).toEqual([made.id, "m"]);
  } finally {
    busy.abort();
  }
  // One Snooze did not pass on still needs a model: there is no telling whose it is.
  const unknown = await rejection(
    sdk.responses.create({ input: "more", previous_response_id: "resp_unknown" }),
  );
  expect((unknown as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: "missing_model" });
});
