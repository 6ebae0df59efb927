import { request } from "node:http";
import { CloudEvent, HTTP } from "cloudevents";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
bodyTimeout: 1s
models:
  qwen:
    aliases: [qwen3]
    command: ${simCommand(["--enable-sleep-mode"])}
  llama:
    aliases: [ünïcödé, 模型]
    command: ${simCommand()}
  untouched:
    command: ${simCommand()}
  warm:
    sleepAfter: 300ms
    prewarmBudget: 10m
    command: ${simCommand(["--enable-sleep-mode"])}
`);
});
afterAll(() => snooze.close(1_000));

let ids = 0;
const nextId = () => `event-${++ids}`;
/** A binary-mode wake of qwen's headers, with `patch` set over them (undefined: left out). */
const binaryHeaders = (patch: Record<string, string | undefined> = {}) =>
  Object.fromEntries(
    Object.entries({
      "ce-specversion": "1.0",
      "ce-id": nextId(),
      "ce-source": "/test/events",
      "ce-type": "dev.snooze.model.wake",
      "ce-subject": "qwen",
      "content-type": "application/json",
      ...patch,
    }).filter(([, v]) => v !== undefined),
  ) as Record<string, string>;
const tierOf = (model: string) => snooze.autoscaler.controller(model)!.tier;

const send = (headers: Record<string, string>, body: string | Buffer) =>
  fetch(`${snooze.url}/snooze/v1/events`, { method: "POST", headers, body });

/** A structured-mode event, attributes as given (nothing filled in). */
const structured = (attributes: Record<string, unknown>) =>
  send({ "content-type": "application/cloudevents+json" }, JSON.stringify(attributes));

const valid = (patch: Record<string, unknown> = {}) => ({
  specversion: "1.0",
  id: nextId(),
  source: "/test/events",
  type: "dev.snooze.model.wake",
  subject: "qwen",
  ...patch,
});

/** A refusal: its status, and the reason in an OpenAI-shaped body. */
async function refusal(
  response: Response,
): Promise<{ status: number; code: string; message: string; param: string | null }> {
  const body = (await response.json()) as { error: { code: string; message: string; param: string | null } };
  return {
    status: response.status,
    code: body.error.code,
    message: body.error.message,
    param: body.error.param,
  };
}

describe("accepted events answer 2xx with an empty body, as Knative Eventing expects", () => {
  test("binary mode (made by the SDK): a wake is 202 at once, the model wakes", async () => {
    const event = new CloudEvent({ type: "dev.snooze.model.wake", source: "/test/events", subject: "qwen" });
    const message = HTTP.binary(event);
    const response = await send(message.headers as Record<string, string>, String(message.body ?? ""));
    expect(response.status).toBe(202);
    expect(await response.text()).toBe("");
    expect(response.headers.get("snooze-event")).toBe("accepted");
    await until(() => tierOf("qwen") === "ready", 10_000, "qwen ready");
  });

  test("structured mode (made by the SDK): a sleep answers 200 once the model sleeps", async () => {
    const event = new CloudEvent({
      type: "dev.snooze.model.sleep",
      source: "/test/events",
      data: { model: "qwen3" },
    });
    const message = HTTP.structured(event);
    const response = await send(message.headers as Record<string, string>, String(message.body));
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("");
    expect(tierOf("qwen")).toBe("asleep-1");
  });

  test("batch mode: every event of the batch is taken", async () => {
    const response = await send(
      { "content-type": "application/cloudevents-batch+json" },
      JSON.stringify([
        valid({ type: "dev.snooze.model.wake", subject: "llama" }),
        valid({ type: "dev.snooze.model.prewarm", subject: "qwen", data: { for: "10m" } }),
      ]),
    );
    expect(response.status).toBe(202);
    expect(await response.text()).toBe("");
    await until(() => tierOf("llama") === "ready" && tierOf("qwen") === "ready", 10_000, "both ready");
  });

  test("prewarm wakes the model now", async () => {
    expect((await structured(valid({ type: "dev.snooze.model.sleep" }))).status).toBe(200);
    expect(tierOf("qwen")).toBe("asleep-1");
    const response = await structured(valid({ type: "dev.snooze.model.prewarm", data: { for: "30m" } }));
    expect(response.status).toBe(202);
    await until(() => tierOf("qwen") === "ready", 10_000, "qwen ready");
  });

  test("prewarm's for keeps the model awake that long (within prewarmBudget), then it sleeps", {
    timeout: 30_000,
  }, async () => {
    const response = await structured(
      valid({ type: "dev.snooze.model.prewarm", subject: "warm", data: { for: "6s" } }),
    );
    expect(response.status).toBe(202);
    await until(() => tierOf("warm") === "ready", 10_000, "warm ready");
    // Well past its sleepAfter (300 ms), still awake: the prewarm holds it for 6 s.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(tierOf("warm")).toBe("ready");
    await until(() => tierOf("warm") === "asleep-1", 15_000, "warm asleep after the prewarm");
  });

  test("structured mode with data_base64: the data is read as the same JSON", async () => {
    expect((await structured(valid({ type: "dev.snooze.model.sleep" }))).status).toBe(200);
    const response = await structured(
      valid({
        subject: undefined,
        datacontenttype: "application/json",
        data_base64: Buffer.from(JSON.stringify({ model: "qwen3" })).toString("base64"),
      }),
    );
    expect(response.status).toBe(202);
    await until(() => tierOf("qwen") === "ready", 10_000, "qwen ready");
  });

  test("a redelivery (same source and id) is answered 200 and not acted on again", async () => {
    const stop = valid({ type: "dev.snooze.model.stop", subject: "llama" });
    expect((await structured(stop)).status).toBe(200);
    expect(tierOf("llama")).toBe("cold");
    // The same id from another source is another event; the same source and id is the same one.
    const wake = valid({ subject: "llama" });
    expect((await structured(wake)).status).toBe(202);
    await until(() => tierOf("llama") === "ready", 10_000, "llama ready");
    const again = await structured(stop);
    expect(again.status).toBe(200);
    expect(again.headers.get("snooze-event")).toBe("duplicate");
    expect(await again.text()).toBe("");
    expect(tierOf("llama")).toBe("ready");
  });
});

test("an event twice in one batch is acted on once, as a redelivery is (found by an outside tester: the second copy, a stop, stopped what the batch's wake had just started)", async () => {
  const stop = valid({ type: "dev.snooze.model.stop", subject: "llama" });
  const answer = await send(
    { "content-type": "application/cloudevents-batch+json" },
    JSON.stringify([stop, valid({ subject: "llama" }), stop]),
  );
  expect(answer.status).toBe(200);
  expect(answer.headers.get("snooze-event")).toBe("accepted; some duplicate");
  await until(() => tierOf("llama") === "ready", 10_000, "llama ready");
});

describe("binary mode's ce-* headers are percent-decoded (CloudEvents HTTP binding 3.1.3.2)", () => {
  /** A binary-mode stop event made by the SDK, with some ce-* headers as a spec-conforming sender writes them. */
  const encodedStop = (headers: Record<string, string>) => {
    const message = HTTP.binary(new CloudEvent({ type: "dev.snooze.model.stop", source: "/test/events" }));
    return send({ ...(message.headers as Record<string, string>), ...headers }, String(message.body ?? ""));
  };

  test("an alias outside ASCII, as the Python SDK sends it, names its model (found by an outside tester)", async () => {
    for (const subject of [
      "%C3%BCn%C3%AFc%C3%B6d%C3%A9",
      "%e6%a8%a1%e5%9e%8b",
      '"%C3%BCn%C3%AFc%C3%B6d%C3%A9"',
    ]) {
      const response = await encodedStop({ "ce-subject": subject });
      expect(response.status, `${subject}: ${await response.text()}`).toBe(200);
    }
    // Unnecessarily encoded characters are taken too, in any attribute.
    const response = await encodedStop({ "ce-subject": "llam%61", "ce-type": "dev.snooze.model.%73top" });
    expect(response.status).toBe(200);
  });

  test("encoded bytes that are not UTF-8 are refused, naming the header", async () => {
    const overlong = await refusal(await encodedStop({ "ce-subject": "llama%C0%A0" }));
    expect(overlong).toMatchObject({ status: 400, code: "invalid_event", param: "ce-subject" });
    expect(overlong.message).toContain("not percent-encoded UTF-8");
  });
});

describe("every malformed event is refused with a status and a reason", () => {
  test.each([
    ["no id", { id: undefined }, 400, "invalid_event", "no id"],
    ["an empty id", { id: "" }, 400, "invalid_event", "no id"],
    ["no source", { source: undefined }, 400, "invalid_event", "no source"],
    ["no type", { type: undefined }, 400, "invalid_event", "no type"],
    ["no specversion", { specversion: undefined }, 400, "invalid_event", "no specversion"],
    ["specversion 0.3", { specversion: "0.3" }, 400, "unsupported_specversion", "0.3"],
    ["specversion as a JSON number", { specversion: 1.0 }, 400, "invalid_event", 'must be the string "1.0"'],
    [
      "an unknown type",
      { type: "com.example.other" },
      400,
      "unsupported_event_type",
      "dev.snooze.model.wake",
    ],
    [
      "a ping without snoozeaction",
      { type: "dev.knative.sources.ping" },
      400,
      "unsupported_event_type",
      "snoozeaction",
    ],
    ["no model", { subject: undefined }, 400, "missing_model", "subject or data.model"],
    ["an unknown model", { subject: "gpt-9" }, 404, "model_not_found", "gpt-9"],
    [
      "a bad prewarm duration",
      { type: "dev.snooze.model.prewarm", data: { for: "soon" } },
      400,
      "invalid_duration",
      "soon",
    ],
    [
      "a prewarm duration as a JSON number (no unit)",
      { type: "dev.snooze.model.prewarm", data: { for: 600 } },
      400,
      "invalid_duration",
      'a duration string with its unit, like "10m" or "600s", not the number 600',
    ],
    [
      "a wake with a duration (only a prewarm takes one)",
      { type: "dev.snooze.model.wake", data: { for: "10m" } },
      400,
      "unsupported_field",
      "dev.snooze.model.prewarm",
    ],
    [
      "a sleep with a duration",
      { type: "dev.snooze.model.sleep", data: { for: "10m" } },
      400,
      "unsupported_field",
      "only to a prewarm",
    ],
    ["data that is not an object", { data: [1, 2] }, 400, "invalid_event", "JSON object"],
    ["a time that is not a timestamp", { time: "yesterday" }, 400, "invalid_event", "RFC 3339"],
    [
      "a subject that is not a string (the SDK's schema)",
      { subject: 5 },
      400,
      "invalid_event",
      "the event's subject must be a string, not 5",
    ],
    [
      "a dataschema that is not a URI (the SDK's schema)",
      { dataschema: "::nope" },
      400,
      "invalid_event",
      "the event's dataschema must be an absolute URI",
    ],
  ])("structured, %s", async (_what, patch, status, code, reason) => {
    const attributes = Object.fromEntries(
      Object.entries(valid(patch as Record<string, unknown>)).filter(([, v]) => v !== undefined),
    );
    const answer = await refusal(await structured(attributes));
    expect(answer.status).toBe(status);
    expect(answer.code).toBe(code);
    expect(answer.message).toContain(reason);
  });

  test("structured, a prewarm duration of 1e999 (a JSON number too large for a double): said where, not `null`", async () => {
    // Found by an outside tester: it read "not null", JSON.stringify's word for Infinity.
    const text = JSON.stringify(valid({ type: "dev.snooze.model.prewarm", data: { for: 0 } })).replace(
      '"for":0',
      '"for":1e999',
    );
    const answer = await refusal(await send({ "content-type": "application/cloudevents+json" }, text));
    expect(answer).toMatchObject({ status: 400, code: "invalid_event", param: "data.for" });
    expect(answer.message).toBe(
      "the event's data.for is a JSON number too large for a double (read as Infinity)",
    );
  });

  test("binary, a prewarm duration as a JSON number, 600 or 1e999: a duration takes its unit", async () => {
    for (const [number, said] of [
      ["600", "not the number 600"],
      ["1e999", "not the number (too large to read)"],
    ]) {
      const headers = binaryHeaders({ "ce-type": "dev.snooze.model.prewarm" });
      const answer = await refusal(await send(headers, `{"for":${number}}`));
      expect(answer).toMatchObject({ status: 400, code: "invalid_duration", param: "data.for" });
      expect(answer.message).toContain(said);
    }
  });

  // Found by an outside tester: a numeric id was "no id", a present but wrong snoozeaction "needs
  // the extension", and no refusal named its attribute in `param`.
  test.each([
    ["a numeric id", { id: 5 }, "id", "the event's id must be a string, not 5"],
    ["no id", { id: undefined }, "id", "no id"],
    ["a time that is not a timestamp", { time: "yesterday" }, "time", "RFC 3339"],
    [
      "a ping whose snoozeaction is not an action",
      { type: "dev.knative.sources.ping", snoozeaction: "explode" },
      "snoozeaction",
      'must be wake, prewarm, sleep or stop, not "explode"',
    ],
    ["an unknown type", { type: "com.example.other" }, "type", "unsupported event type"],
    // Found by an outside tester: a JSON-number specversion was "unsupported_specversion", "specversion
    // 1 is not supported; send 1.0"; the schema's refusals were its validator's JSON, param null.
    [
      "a specversion sent as a JSON number",
      { specversion: 1.0 },
      "specversion",
      'the event\'s specversion must be the string "1.0", not 1 (a JSON number)',
    ],
    ["a numeric subject", { subject: 5 }, "subject", "the event's subject must be a string, not 5"],
    [
      "a dataschema that is not a URI",
      { dataschema: "::nope" },
      "dataschema",
      'the event\'s dataschema must be an absolute URI, like https://example.com/schema.json, not "::nope"',
    ],
    [
      "an attribute name that is not lowercase",
      { "Bad-Name": "x" },
      "Bad-Name",
      '"Bad-Name" is not a CloudEvents attribute name',
    ],
  ])("structured, %s: the refusal names the attribute in param", async (_what, patch, param, reason) => {
    const attributes = Object.fromEntries(
      Object.entries(valid(patch as Record<string, unknown>)).filter(([, v]) => v !== undefined),
    );
    const answer = await refusal(await structured(attributes));
    expect(answer.status).toBe(400);
    expect(answer.param).toBe(param);
    expect(answer.message).toContain(reason);
    expect(answer.message).not.toMatch(/instancePath|schemaPath/);
  });

  test("binary, an empty ce-subject is no model named, as in structured mode: missing_model, or data.model names it (found by an outside tester: invalid_event)", async () => {
    const answer = await refusal(await send(binaryHeaders({ "ce-subject": "" }), "{}"));
    expect(answer).toMatchObject({ status: 400, code: "missing_model" });
    expect(answer.message).toContain("subject or data.model");
    const named = await send(binaryHeaders({ "ce-subject": "" }), '{"model":"qwen"}');
    expect(named.status).toBe(202);
  });

  test("binary, a schema refusal names the ce-* header in param, in words", async () => {
    const answer = await refusal(await send(binaryHeaders({ "ce-dataschema": "::nope" }), ""));
    expect(answer).toMatchObject({ status: 400, code: "invalid_event", param: "ce-dataschema" });
    expect(answer.message).toBe(
      'the event\'s dataschema must be an absolute URI, like https://example.com/schema.json, not "::nope"',
    );
  });

  test("binary, a ce-data_base64 header is refused naming it, not read in place of the body (found by an outside tester: the header's model was acted on, the body's ignored)", async () => {
    const before = tierOf("untouched");
    const header = Buffer.from('{"model":"untouched"}').toString("base64");
    for (const [name, value] of [
      ["ce-data_base64", header],
      ["ce-data", '{"model":"untouched"}'],
    ] as const) {
      const answer = await refusal(
        await send(
          binaryHeaders({ "ce-type": "dev.snooze.model.stop", "ce-subject": undefined, [name]: value }),
          '{"model":"qwen"}',
        ),
      );
      expect(answer).toMatchObject({ status: 400, code: "invalid_event", param: name });
      expect(answer.message).toBe(
        `${name} is no attribute: a binary-mode event's data is the body (data and data_base64 are members of a structured-mode event)`,
      );
    }
    expect(tierOf("untouched")).toBe(before);
  });

  test("binary, data sent as text/plain: 415 unsupported_media_type naming content-type, listing what to send, the batch type included (found by an outside tester)", async () => {
    const answer = await refusal(await send(binaryHeaders({ "content-type": "text/plain" }), "hello"));
    expect(answer).toMatchObject({ status: 415, code: "unsupported_media_type", param: "content-type" });
    expect(answer.message).toContain("content-type text/plain");
    for (const type of [
      "application/json",
      "application/cloudevents+json",
      "application/cloudevents-batch+json",
    ])
      expect(answer.message).toContain(type);
  });

  test("binary, data sent as another non-JSON type (application/xml): 415 naming content-type (found by an outside tester: no param)", async () => {
    const answer = await refusal(
      await send(binaryHeaders({ "content-type": "application/xml" }), "<hello/>"),
    );
    expect(answer).toMatchObject({ status: 415, code: "unsupported_media_type", param: "content-type" });
    expect(answer.message).toContain("not application/xml");
  });

  test("structured mode in another event format (XML, Avro, Protobuf): 415 naming it, not a missing ce-specversion (found by an outside tester)", async () => {
    for (const type of [
      "application/cloudevents+xml",
      "application/cloudevents+avro",
      "application/cloudevents+protobuf",
      "application/cloudevents-batch+protobuf",
    ]) {
      const answer = await refusal(await send({ "content-type": type }, "<event/>"));
      expect(answer).toMatchObject({ status: 415, code: "unsupported_media_type", param: "content-type" });
      expect(answer.message).toContain(`content-type ${type}`);
      expect(answer.message).toContain("application/cloudevents+json");
      expect(answer.message).toContain("application/cloudevents-batch+json");
    }
  });

  test("an empty batch is refused (was 200 duplicate); an unknown model in a batch names the event", async () => {
    const batch = (events: unknown[]) =>
      send({ "content-type": "application/cloudevents-batch+json" }, JSON.stringify(events));
    const empty = await refusal(await batch([]));
    expect(empty).toMatchObject({ status: 400, code: "invalid_event" });
    expect(empty.message).toContain("the batch is empty");
    const unknown = await refusal(await batch([valid({ subject: "llama" }), valid({ subject: "gpt-9" })]));
    expect(unknown).toMatchObject({ status: 404, code: "model_not_found" });
    // Counted from 1 (found by an outside tester: the second event was "event 1").
    expect(unknown.message).toMatch(/^event 2 of 2 in the batch: .*gpt-9/);
  });

  test("a subject and a data.model naming two models are refused, not one of them acted on (found by a probe: the subject's was acted on)", async () => {
    const before = tierOf("untouched");
    for (const [subject, model] of [
      ["untouched", "llama"],
      ["untouched", "gpt-9"],
    ]) {
      const answer = await refusal(
        await structured(valid({ type: "dev.snooze.model.wake", subject, data: { model } })),
      );
      expect(answer).toMatchObject({ status: 400, code: "invalid_event", param: "data.model" });
      expect(answer.message).toContain("not the same one");
    }
    const binary = await refusal(
      await send(binaryHeaders({ "ce-subject": "untouched" }), JSON.stringify({ model: "llama" })),
    );
    expect(binary).toMatchObject({ status: 400, code: "invalid_event", param: "data.model" });
    const inBatch = await refusal(
      await send(
        { "content-type": "application/cloudevents-batch+json" },
        JSON.stringify([
          valid({ subject: "llama" }),
          valid({ subject: "untouched", data: { model: "llama" } }),
        ]),
      ),
    );
    expect(inBatch.message).toMatch(/^event 2 of 2 in the batch: .*not the same one/);
    expect(tierOf("untouched")).toBe(before);
    // The same model, by its id and an alias, is one model.
    const same = await structured(
      valid({ type: "dev.snooze.model.sleep", subject: "qwen", data: { model: "qwen3" } }),
    );
    expect(same.status).toBe(200);
  });

  test("binary, a ce-* header sent twice is refused naming it, and nothing is acted on", async () => {
    // fetch joins repeated headers into one; node:http sends an array as repeated lines.
    const before = tierOf("untouched");
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${snooze.url}/snooze/v1/events`, {
        method: "POST",
        headers: {
          ...binaryHeaders({ "ce-type": "dev.snooze.model.stop" }),
          "ce-subject": ["untouched", "llama"],
        },
      });
      req.on("response", (res) => {
        let body = "";
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body).error).toMatchObject({ code: "invalid_event", param: "ce-subject" });
    expect(tierOf("untouched")).toBe(before);
  });

  test("a body that stops arriving is a 408 once bodyTimeout passes, and nothing is acted on (found by a probe: the connection was held, unanswered, for Node's 5 minutes)", async () => {
    const before = tierOf("untouched");
    const answer = await new Promise<{ status: number; body: string; connection?: string }>(
      (resolve, reject) => {
        const req = request(`${snooze.url}/snooze/v1/events`, {
          method: "POST",
          headers: { ...binaryHeaders({ "ce-subject": "untouched" }), "content-length": "100" },
        });
        req.on("response", (res) => {
          let body = "";
          res.on("data", (chunk) => (body += chunk));
          res.on("end", () => resolve({ status: res.statusCode!, body, connection: res.headers.connection }));
        });
        req.on("error", reject);
        // 10 bytes of the 100 promised, and then nothing.
        req.write('{"model":');
      },
    );
    expect(answer.status).toBe(408);
    expect(answer.connection).toBe("close");
    expect(JSON.parse(answer.body).error).toMatchObject({ code: "request_timeout" });
    expect(JSON.parse(answer.body).error.message).toContain("bodyTimeout");
    expect(tierOf("untouched")).toBe(before);
  });

  test("an unknown model named in data.model is refused naming data.model", async () => {
    const answer = await refusal(await structured(valid({ subject: undefined, data: { model: "gpt-9" } })));
    expect(answer).toMatchObject({ status: 404, code: "model_not_found", param: "data.model" });
  });

  test("a data.model that is no string is refused naming data.model and what it was, not as no model named (found by an outside tester)", async () => {
    for (const model of [5, { id: "qwen" }, ["qwen"], true])
      for (const subject of [undefined, "qwen"]) {
        const answer = await refusal(await structured(valid({ subject, data: { model } })));
        expect(answer).toMatchObject({ status: 400, code: "invalid_event", param: "data.model" });
        expect(answer.message).toBe(
          `the event's data.model must be a string, a model's id or alias, not ${JSON.stringify(model)}`,
        );
      }
    // Binary mode reads its data the same way.
    const binary = await refusal(await send(binaryHeaders({ "ce-subject": undefined }), '{"model":7}'));
    expect(binary).toMatchObject({ status: 400, code: "invalid_event", param: "data.model" });
  });

  test("data_base64 that is not base64, or sent with data as well, is refused naming it", async () => {
    const notBase64 = await refusal(
      await structured(valid({ subject: undefined, data_base64: "not base64 at all!" })),
    );
    expect(notBase64).toMatchObject({ status: 400, code: "invalid_event", param: "data_base64" });
    const both = await refusal(
      await structured(
        valid({ data: { model: "qwen" }, data_base64: Buffer.from('{"model":"qwen"}').toString("base64") }),
      ),
    );
    expect(both).toMatchObject({ status: 400, param: "data_base64" });
    expect(both.message).toContain("not both");
  });

  test("a gzipped event is 415 unsupported_content_encoding, as on /v1", async () => {
    const { gzipSync } = await import("node:zlib");
    const response = await send(
      { "content-type": "application/cloudevents+json", "content-encoding": "gzip" },
      gzipSync(JSON.stringify(valid())),
    );
    const answer = await refusal(response);
    expect(answer).toMatchObject({ status: 415, code: "unsupported_content_encoding" });
    expect(answer.message).toContain("Content-Encoding: gzip");
  });

  test.each([
    ["a wake", "dev.snooze.model.wake", "10m"],
    ["a prewarm with a bad duration", "dev.snooze.model.prewarm", "soon"],
  ])("a refusal of data.for (%s) names the field, and nothing is woken", async (_what, type, duration) => {
    const before = tierOf("untouched");
    const answer = await refusal(
      await structured(valid({ type, subject: "untouched", data: { for: duration } })),
    );
    expect(answer.status).toBe(400);
    expect(answer.param).toBe("data.for");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(tierOf("untouched")).toBe(before);
  });

  test.each([
    ["no ce-id", { "ce-id": undefined }, "no ce-id"],
    ["no ce-source", { "ce-source": undefined }, "no ce-source"],
    ["no ce-type", { "ce-type": undefined }, "no ce-type"],
    ["no ce-specversion", { "ce-specversion": undefined }, "no ce-specversion"],
    ["ce-specversion 0.3", { "ce-specversion": "0.3" }, "0.3"],
  ])("binary, %s", async (_what, patch, reason) => {
    const answer = await refusal(await send(binaryHeaders(patch), ""));
    expect(answer.status).toBe(400);
    expect(answer.message).toContain(reason);
  });

  test("binary, data that is not JSON: param names the data, as for data that is JSON but no object (found by an outside tester: param null)", async () => {
    const answer = await refusal(await send(binaryHeaders(), "{nope"));
    expect(answer).toMatchObject({ status: 400, code: "invalid_json", param: "data" });
  });

  test('data that is a JSON string is said to be one, in either mode (found by an outside tester: `"qwen"` was invalid_json, text that is not JSON); one holding a JSON object, as the SDK sends stringified data, names its model', async () => {
    for (const response of [
      await send(binaryHeaders(), JSON.stringify("qwen")),
      await structured(valid({ datacontenttype: "application/json", data: "qwen" })),
    ])
      expect(await refusal(response)).toMatchObject({ status: 400, code: "invalid_event", param: "data" });
    // The JavaScript SDK in structured mode writes data it was handed as a string as a JSON string.
    const event = new CloudEvent({
      type: "dev.snooze.model.stop",
      source: "/test/events",
      datacontenttype: "application/json",
      data: JSON.stringify({ model: "untouched" }),
    });
    const message = HTTP.structured(event);
    expect(String(message.body)).toContain('"data":"{');
    const response = await send(message.headers as Record<string, string>, String(message.body));
    expect(response.status).toBe(200);
  });

  test("no model named: param names the subject, where a model is named first (found by an outside tester: param null)", async () => {
    const structuredAnswer = await refusal(await structured(valid({ subject: undefined })));
    expect(structuredAnswer).toMatchObject({ status: 400, code: "missing_model", param: "subject" });
    const binaryAnswer = await refusal(await send(binaryHeaders({ "ce-subject": undefined }), "{}"));
    expect(binaryAnswer).toMatchObject({ status: 400, code: "missing_model", param: "subject" });
  });

  test("structured, a body that is not JSON", async () => {
    const answer = await refusal(await send({ "content-type": "application/cloudevents+json" }, "{nope"));
    expect(answer).toMatchObject({ status: 400, code: "invalid_json" });
  });

  test("a plain JSON body is not a CloudEvent", async () => {
    const answer = await refusal(
      await send({ "content-type": "application/json" }, JSON.stringify({ type: "dev.snooze.model.wake" })),
    );
    expect(answer).toMatchObject({ status: 400, code: "not_a_cloudevent" });
  });

  test("a batch with one bad event is refused whole, naming the event", async () => {
    const answer = await refusal(
      await send(
        { "content-type": "application/cloudevents-batch+json" },
        JSON.stringify([valid({ subject: "llama" }), valid({ id: undefined })]),
      ),
    );
    expect(answer.status).toBe(400);
    expect(answer.message).toMatch(/^event 2 of 2 in the batch: the event has no id/);
  });

  test("a batch that is not an array", async () => {
    const answer = await refusal(
      await send({ "content-type": "application/cloudevents-batch+json" }, JSON.stringify(valid())),
    );
    expect(answer.status).toBe(400);
  });

  test("100 KiB is past the size limit: 413", async () => {
    const big = valid({ data: { padding: "x".repeat(100 * 1024) } });
    const answer = await refusal(await structured(big));
    expect(answer).toMatchObject({ status: 413, code: "event_too_large" });
    expect(answer.message).toContain("65536");
  });

  test("a binary-mode event's ce-* headers count towards the limit: 10 kB of them and a 60 kB body is 413", async () => {
    const headers = {
      "content-type": "application/json",
      "ce-specversion": "1.0",
      "ce-id": nextId(),
      "ce-source": "/test",
      "ce-type": "dev.snooze.model.wake",
      "ce-subject": "qwen",
      "ce-padding": "x".repeat(10_000),
    };
    const answer = await refusal(
      await send(headers, JSON.stringify({ model: "qwen", padding: "y".repeat(60_000) })),
    );
    expect(answer).toMatchObject({ status: 413, code: "event_too_large" });
    expect(answer.message).toContain("ce-* headers");
  });
});
