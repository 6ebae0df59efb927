import { describe, expect, test } from "vitest";
import { maxEventNesting, parseIncomingEvents } from "./incoming-event.ts";

const attributes = {
  specversion: "1.0",
  id: "1",
  source: "/test",
  type: "dev.snooze.model.wake",
  subject: "qwen",
};
const binaryHeaders = {
  "ce-specversion": "1.0",
  "ce-id": "1",
  "ce-source": "/test",
  "ce-type": "dev.snooze.model.wake",
  "ce-subject": "qwen",
  "content-type": "application/json",
};
const structured = { "content-type": "application/cloudevents+json" };
const batch = { "content-type": "application/cloudevents-batch+json" };

/** JSON arrays nested `depth` deep, as text (JSON.stringify of such a value would overflow itself). */
const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

describe("data nested deeper than the limit is a 400 naming where, in every mode (found by a probe: 500)", () => {
  // 20,000 levels are 40 kB, inside the size limit: the SDK's validator overflowed the stack.
  const deep = nested(20_000);
  const event = `{"specversion":"1.0","id":"1","source":"/test","type":"dev.snooze.model.wake","subject":"qwen","data":{"x":${deep}}}`;

  test.each([
    ["structured", structured, event],
    ["batch", batch, `[${event}]`],
    ["binary", binaryHeaders, `{"x":${deep}}`],
  ])("%s", (mode, headers, body) => {
    const parsed = parseIncomingEvents(headers, Buffer.from(body));
    expect(parsed).toMatchObject({ ok: false, status: 400, code: "invalid_event" });
    if (parsed.ok) return;
    expect(parsed.message).toContain(`more than ${maxEventNesting} deep`);
    expect(parsed.param).toMatch(/^data\.x(\.0)+$/);
    if (mode === "batch") expect(parsed.message).toMatch(/^event 1 of 1 in the batch/);
  });

  test("an extension attribute nested deep too", () => {
    const parsed = parseIncomingEvents(
      structured,
      Buffer.from(
        `{"specversion":"1.0","id":"1","source":"/test","type":"dev.snooze.model.wake","subject":"qwen","ext":${deep}}`,
      ),
    );
    expect(parsed).toMatchObject({ ok: false, status: 400, code: "invalid_event" });
  });

  test("data nested up to the limit is read", () => {
    // The event is one level, its data the next: the data may take the rest.
    const data = JSON.parse(`{"x":${nested(maxEventNesting - 2)}}`);
    for (const [headers, body] of [
      [structured, JSON.stringify({ ...attributes, data })],
      [binaryHeaders, JSON.stringify(data)],
    ] as const)
      expect(parseIncomingEvents(headers, Buffer.from(body))).toMatchObject({ ok: true });
  });
});

describe("a time that is no date on the calendar is refused, naming it (found by a probe: 30 February was taken)", () => {
  test.each([
    "2026-02-30T10:00:00Z",
    "2026-02-29T10:00:00Z",
    "2026-04-31T08:00:00+02:00",
    "2026-01-01T24:00:00Z",
  ])("%s", (time) => {
    expect(
      parseIncomingEvents(structured, Buffer.from(JSON.stringify({ ...attributes, time }))),
    ).toMatchObject({ ok: false, status: 400, code: "invalid_event", param: "time" });
    expect(parseIncomingEvents({ ...binaryHeaders, "ce-time": time }, Buffer.alloc(0))).toMatchObject({
      ok: false,
      status: 400,
      code: "invalid_event",
      param: "ce-time",
    });
  });

  test.each(["2024-02-29T10:00:00Z", "2026-04-30T23:59:59.123456789-05:30", "2026-12-31t00:00:00z"])(
    "%s is read",
    (time) => {
      expect(
        parseIncomingEvents(structured, Buffer.from(JSON.stringify({ ...attributes, time }))),
      ).toMatchObject({
        ok: true,
      });
      expect(parseIncomingEvents({ ...binaryHeaders, "ce-time": time }, Buffer.alloc(0))).toMatchObject({
        ok: true,
      });
    },
  );
});

describe("data that is not a JSON object is refused naming data (or data_base64) and what it was (found by a probe: param was null)", () => {
  test.each([
    [
      "structured, an array",
      structured,
      JSON.stringify({ ...attributes, data: [1] }),
      "data",
      "a JSON array",
    ],
    [
      "structured, text",
      structured,
      JSON.stringify({ ...attributes, datacontenttype: "text/plain", data: "hello" }),
      "data",
      "not text that is not JSON (text/plain)",
    ],
    [
      "structured, base64 bytes",
      structured,
      JSON.stringify({ ...attributes, datacontenttype: "application/octet-stream", data_base64: "AAE=" }),
      "data_base64",
      "not text that is not JSON",
    ],
    ["binary, a number", binaryHeaders, "5", "data", "a JSON number"],
  ])("%s", (_what, headers, body, param, said) => {
    const parsed = parseIncomingEvents(headers, Buffer.from(body));
    expect(parsed).toMatchObject({ ok: false, status: 400, param });
    if (!parsed.ok) expect(parsed.message).toContain(said);
  });
});

test('a ce-* header sent twice is refused naming it, not read as the joined value (found by a probe: specversion "1.0, 1.0", the model `qwen, llama`)', () => {
  for (const name of ["ce-specversion", "ce-subject", "CE-ID"]) {
    const raw = Object.entries(binaryHeaders).flat();
    raw.push(name, "again");
    const parsed = parseIncomingEvents(binaryHeaders, Buffer.alloc(0), raw);
    expect(parsed).toMatchObject({
      ok: false,
      status: 400,
      code: "invalid_event",
      param: name.toLowerCase(),
    });
    if (!parsed.ok) expect(parsed.message).toContain("sent more than once");
  }
  // In structured mode the event is the body: ce-* headers are not read.
  const raw = ["content-type", structured["content-type"], "ce-id", "a", "ce-id", "b"];
  expect(parseIncomingEvents(structured, Buffer.from(JSON.stringify(attributes)), raw)).toMatchObject({
    ok: true,
  });
});

test.each([
  ["snoozeaction", ["wake"], "array"],
  ["traceparent", { version: "00" }, "object"],
  ["myext", { a: 1 }, "object"],
])(
  'an extension %s whose value is a JSON %s is refused naming it (found by a probe: snoozeaction ["wake"] was a wake)',
  (name, value, kind) => {
    const event = { ...attributes, type: "dev.knative.sources.ping", snoozeaction: "wake", [name]: value };
    const parsed = parseIncomingEvents(structured, Buffer.from(JSON.stringify(event)));
    expect(parsed).toMatchObject({ ok: false, status: 400, code: "invalid_event", param: name });
    if (!parsed.ok) expect(parsed.message).toContain(`not a JSON ${kind}`);
  },
);

test("extensions that are strings, numbers or booleans are read", () => {
  const event = { ...attributes, text: "a", count: 5, flag: true, gone: null };
  expect(parseIncomingEvents(structured, Buffer.from(JSON.stringify(event)))).toMatchObject({ ok: true });
});

test("what a redelivery is told by takes the same room however long the source and id are (found by a probe: 600 events of 60 kB ids held 90 MB)", () => {
  const keyOf = (patch: Record<string, string>) => {
    const parsed = parseIncomingEvents(structured, Buffer.from(JSON.stringify({ ...attributes, ...patch })));
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.commands[0]!.key;
  };
  const long = keyOf({ id: "x".repeat(60_000), source: `/${"y".repeat(3_000)}` });
  expect(long.length).toBeLessThanOrEqual(64);
  expect(keyOf({ id: "x".repeat(60_000), source: `/${"y".repeat(3_000)}` })).toBe(long);
  // The source and the id, not their concatenation: ("/a", "b:c") and ("/a:b", "c") are two events.
  expect(keyOf({ source: "/a", id: "bc" })).not.toBe(keyOf({ source: "/ab", id: "c" }));
  expect(keyOf({ source: "/a", id: "1" })).not.toBe(keyOf({ source: "/a", id: "2" }));
});

test.each(["application/octet-stream", "application/xml", "text/csv; charset=utf-8"])(
  "binary, data sent as %s is a 415 naming it: Snooze reads JSON data (found by a probe: 400 invalid_json)",
  (type) => {
    const parsed = parseIncomingEvents({ ...binaryHeaders, "content-type": type }, Buffer.from("<a/>"));
    expect(parsed).toMatchObject({
      ok: false,
      status: 415,
      code: "unsupported_media_type",
      param: "content-type",
    });
    if (!parsed.ok)
      expect(parsed.message).toContain(`not ${type.split(";")[0]}: send the data as application/json`);
  },
);

test.each(["application/json; charset=utf-8", "text/json", "application/vnd.example+json"])(
  "binary, data sent as %s is read",
  (type) => {
    const parsed = parseIncomingEvents({ ...binaryHeaders, "content-type": type }, Buffer.from('{"a":1}'));
    expect(parsed).toMatchObject({ ok: true });
  },
);

test("a body with a byte order mark, or in UTF-16, is read as the same JSON, as an OpenAI request's is", () => {
  const event = JSON.stringify(attributes);
  for (const body of [
    Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(event)]),
    Buffer.from(`\ufeff${event}`, "utf16le"),
  ]) {
    expect(parseIncomingEvents(structured, body)).toMatchObject({ ok: true, commands: [{ verb: "wake" }] });
  }
  const data = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"qwen"}')]);
  const { "ce-subject": _, ...noSubject } = binaryHeaders;
  expect(parseIncomingEvents(noSubject, data)).toMatchObject({ ok: true, commands: [{ model: "qwen" }] });
});

describe('data that is a JSON string is read once, as sent, not as the SDK hands it on (found by an outside tester: `"5"` was refused as a number, `"qwen"` as text that is not JSON)', () => {
  /** The string `value` as an event's JSON data, in each mode. */
  const stringData = (value: string, type = attributes.type): [string, Record<string, string>, string][] => {
    const event = { ...attributes, type };
    const headers = { ...binaryHeaders, "ce-type": type };
    return [
      ["binary, application/json", headers, JSON.stringify(value)],
      ["binary, text/json", { ...headers, "content-type": "text/json" }, JSON.stringify(value)],
      ["structured, no datacontenttype", structured, JSON.stringify({ ...event, data: value })],
      [
        "structured, application/json",
        structured,
        JSON.stringify({ ...event, datacontenttype: "application/json", data: value }),
      ],
      ["batch", batch, JSON.stringify([{ ...event, datacontenttype: "application/json", data: value }])],
    ];
  };

  test.each(
    ["qwen", "5", "[1]", "true"].flatMap((value) =>
      stringData(value).map(([mode, headers, body]) => [mode, value, headers, body] as const),
    ),
  )("%s, the JSON string %j: invalid_event, said to be a JSON string", (_mode, _value, headers, body) => {
    const parsed = parseIncomingEvents(headers, Buffer.from(body));
    expect(parsed).toMatchObject({ ok: false, status: 400, code: "invalid_event", param: "data" });
    if (!parsed.ok) expect(parsed.message).toContain("not a JSON string");
  });

  // What the JavaScript SDK sends in structured mode for data handed to it already JSON.stringify'd.
  test.each(stringData('{"model":"qwen","for":"5m"}', "dev.snooze.model.prewarm"))(
    "%s, a JSON string holding a JSON object: read as that object",
    (_mode, headers, body) => {
      expect(parseIncomingEvents(headers, Buffer.from(body))).toMatchObject({
        ok: true,
        commands: [{ model: "qwen", forMs: 300_000 }],
      });
    },
  );

  test("text of a type other than JSON, and data_base64, holding JSON are read as JSON, as before", () => {
    for (const event of [
      { ...attributes, datacontenttype: "text/plain", data: '{"for":"1m"}' },
      { ...attributes, data_base64: Buffer.from('{"for":"1m"}').toString("base64") },
      { ...attributes, data_base64: Buffer.from('\ufeff{"for":"1m"}', "utf16le").toString("base64") },
    ])
      expect(
        parseIncomingEvents(
          structured,
          Buffer.from(JSON.stringify({ ...event, type: "dev.snooze.model.prewarm" })),
        ),
      ).toMatchObject({ ok: true, commands: [{ forMs: 60_000 }] });
  });
});
