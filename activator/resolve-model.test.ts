import { describe, expect, test } from "vitest";
import { resolveModel } from "./resolve-model.ts";

const names = new Map([
  ["qwen", "qwen"],
  ["q", "qwen"],
  ["llama", "llama"],
]);
const json = { "content-type": "application/json" };
const body = (o: unknown) => Buffer.from(JSON.stringify(o));

describe("resolveModel", () => {
  test("body model, with aliases rewritten to the id", () => {
    const result = resolveModel(json, body({ model: "q", prompt: "x" }), names);
    expect(result.ok && result.model).toBe("qwen");
    expect(result.ok && JSON.parse(result.body.toString()).model).toBe("qwen");
  });

  test("a model whose engine serves another name (servedModel): the body says that name", () => {
    const revisions = new Map([["qwen-00002", "qwen-00002"]]);
    const served = (id: string) => (id === "qwen-00002" ? "qwen" : undefined);
    const result = resolveModel(json, body({ model: "qwen-00002", prompt: "x" }), revisions, served);
    expect(result.ok && result.model).toBe("qwen-00002");
    expect(result.ok && JSON.parse(result.body.toString()).model).toBe("qwen");
    // The served name is no name of the model: two revisions may serve it, so it routes nowhere by body.
    expect(resolveModel(json, body({ model: "qwen" }), revisions, served)).toMatchObject({
      ok: false,
      status: 404,
    });
  });

  test("the header wins over the body", () => {
    const result = resolveModel({ ...json, "snooze-model": "llama" }, body({ model: "q" }), names);
    expect(result.ok && result.model).toBe("llama");
    // Another model's name in the body is the client's to write: left as it is.
    expect(result.ok && JSON.parse(result.body.toString()).model).toBe("q");
  });

  test("routed by the header or Host, an alias of that model in the body is rewritten as well", () => {
    const byHeader = resolveModel({ ...json, "snooze-model": "q" }, body({ model: "q", prompt: "x" }), names);
    expect(byHeader.ok && byHeader.model).toBe("qwen");
    expect(byHeader.ok && JSON.parse(byHeader.body.toString())).toEqual({ model: "qwen", prompt: "x" });
    const byHost = resolveModel({ ...json, host: "q.models.example.com" }, body({ prompt: "x" }), names);
    expect(byHost.ok && JSON.parse(byHost.body.toString())).toEqual({ prompt: "x" });
    const served = (id: string) => (id === "qwen" ? "Qwen/Qwen3-8B" : undefined);
    const both = resolveModel({ ...json, "snooze-model": "qwen" }, body({ model: "q" }), names, served);
    expect(both.ok && JSON.parse(both.body.toString()).model).toBe("Qwen/Qwen3-8B");
  });

  test("the first label of Host, in any case", () => {
    const result = resolveModel({ host: "llama.models.example.com:8080" }, Buffer.alloc(0), names);
    expect(result.ok && result.model).toBe("llama");
    const upper = resolveModel({ host: "Llama.Models.Example.com" }, Buffer.alloc(0), names);
    expect(upper.ok && upper.model).toBe("llama");
    // Found by an outside tester: a host of one label (a compose network's alias) was ignored.
    for (const host of ["llama", "Llama:8080", "q"])
      expect(resolveModel({ host }, Buffer.alloc(0), names)).toMatchObject({
        ok: true,
        model: host === "q" ? "qwen" : "llama",
      });
    expect(resolveModel({ host: "[::1]:8080" }, Buffer.alloc(0), names)).toMatchObject({
      ok: false,
      status: 400,
    });
  });

  test("a Host label matches a name written with capitals, in any case", () => {
    // Found by an outside tester: alias `Alpha2`, `Host: alpha2` was a 400 missing_model, as only the
    // label was lowered.
    const capitals = new Map([
      ["alpha", "alpha"],
      ["Alpha2", "alpha"],
      ["QWEN", "QWEN"],
    ]);
    for (const host of ["alpha2", "ALPHA2.models.example", "Alpha2:8080", "aLpHa2"])
      expect(resolveModel({ host }, Buffer.alloc(0), capitals)).toMatchObject({ ok: true, model: "alpha" });
    expect(resolveModel({ host: "qwen.models.example" }, Buffer.alloc(0), capitals)).toMatchObject({
      ok: true,
      model: "QWEN",
    });
    // Two models whose names differ only in case (the settings refuse them; Kubernetes Models could
    // bring them): a label that matches both names neither.
    const clash = new Map([
      ["Beta", "one"],
      ["BETA", "two"],
    ]);
    expect(resolveModel({ host: "beta" }, Buffer.alloc(0), clash)).toMatchObject({ ok: false, status: 400 });
    expect(resolveModel({ host: "Beta" }, Buffer.alloc(0), clash)).toMatchObject({ ok: true, model: "one" });
  });

  test("an alias is rewritten in the client's own bytes: numbers a double cannot hold and deep nesting reach the engine as sent", () => {
    // Found by an outside tester: the body was parsed and encoded again, so a 63-bit seed changed,
    // `1e999` became null, and JSON nested 5,000 deep failed with 502 internal_error.
    const raw =
      '{ "seed" : 9007199254740993, "model" :"q", "temperature":1e999, "x": -0, "y": 1.0, "m": "ünï" }';
    const result = resolveModel(json, Buffer.from(raw), names);
    expect(result.ok && result.body.toString()).toBe(
      '{ "seed" : 9007199254740993, "model" :"qwen", "temperature":1e999, "x": -0, "y": 1.0, "m": "ünï" }',
    );
    const deep = `{"model":"q","x":${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
    const nested = resolveModel(json, Buffer.from(deep), names);
    expect(nested.ok && nested.body.toString()).toBe(deep.replace('"q"', '"qwen"'));
  });

  test("Content-Type is compared in any case", () => {
    // Found by an outside tester: `Application/JSON; charset=UTF-8` got 400 unsupported_media_type.
    for (const type of ["APPLICATION/JSON", "Application/Json; charset=UTF-8"]) {
      const result = resolveModel({ "content-type": type }, body({ model: "q" }), names);
      expect(result.ok && result.model).toBe("qwen");
    }
  });

  test("errors: unknown, bad JSON, none", () => {
    expect(resolveModel(json, body({ model: "x" }), names)).toMatchObject({ ok: false, status: 404 });
    // A 100,000-character name is not echoed whole (found by an outside tester: a 100 kB message).
    const long = resolveModel(json, body({ model: "x".repeat(100_000) }), names);
    expect(!long.ok && long.error.error.message.length).toBeLessThan(400);
    expect(resolveModel(json, Buffer.from("{"), names)).toMatchObject({ ok: false, status: 400 });
    expect(resolveModel({ host: "localhost" }, Buffer.alloc(0), names)).toMatchObject({
      ok: false,
      status: 400,
      error: { error: { code: "missing_model", param: "model" } },
    });
  });

  test("JSON that is not an object: a 400 that says what it is, unless a header or Host names the model", () => {
    for (const [value, kind] of [
      [[1, 2], "an array"],
      ["qwen", "a string"],
      [null, "null"],
      [7, "a number"],
    ] as const) {
      const answer = resolveModel(json, body(value), names);
      expect(answer).toMatchObject({ ok: false, status: 400, error: { error: { code: "invalid_type" } } });
      if (!answer.ok) expect(answer.error.error.message).toContain(`JSON but ${kind}:`);
    }
    expect(resolveModel({ ...json, "snooze-model": "q" }, body([1]), names)).toMatchObject({
      ok: true,
      model: "qwen",
    });
    expect(resolveModel({ ...json, host: "llama.models.example" }, body([1]), names)).toMatchObject({
      ok: true,
      model: "llama",
    });
  });
  test("a UTF-8 name in the snooze-model header (Node reads header bytes as Latin-1)", () => {
    const accented = new Map([["café", "cafe"]]);
    const header = Buffer.from("café", "utf8").toString("latin1");
    expect(resolveModel({ ...json, "snooze-model": header }, body({}), accented)).toMatchObject({
      ok: true,
      model: "cafe",
    });
  });

  test("a name in another Unicode form than the config's names the same model; the engine gets its own form", () => {
    const nfc = "café".normalize("NFC");
    const nfd = "café".normalize("NFD");
    // The config wrote it composed, a macOS client sends it decomposed (and the other way round).
    for (const [configured, sent] of [
      [nfc, nfd],
      [nfd, nfc],
    ] as const) {
      const accented = new Map([[configured, configured]]);
      const result = resolveModel(json, body({ model: sent, prompt: "x" }), accented);
      expect(result).toMatchObject({ ok: true, model: configured });
      expect(result.ok && JSON.parse(result.body.toString()).model).toBe(configured);
      const header = Buffer.from(sent, "utf8").toString("latin1");
      expect(resolveModel({ ...json, "snooze-model": header }, body({}), accented)).toMatchObject({
        ok: true,
        model: configured,
      });
    }
  });

  test("a body with a byte order mark, or in UTF-16, is read as vLLM reads it, and sent on as UTF-8 (found by an outside tester)", () => {
    const text = JSON.stringify({ model: "q", prompt: "x" });
    for (const bytes of [
      Buffer.from(`\ufeff${text}`),
      Buffer.from(text, "utf16le"),
      Buffer.from(`\ufeff${text}`, "utf16le").swap16(),
    ]) {
      const result = resolveModel(json, bytes, names);
      expect(result).toMatchObject({ ok: true, model: "qwen" });
      expect(result.ok && JSON.parse(result.body.toString("utf8")).model).toBe("qwen");
    }
  });

  test("a body that is not JSON by its Content-Type: 400 naming it and saying what to send", () => {
    const form = { "content-type": "application/x-www-form-urlencoded" };
    const answer = resolveModel(form, body({ model: "qwen" }), names);
    expect(answer).toMatchObject({
      ok: false,
      status: 400,
      // The header at fault is the param, as a duplicate `snooze-model` header's is.
      error: { error: { code: "unsupported_media_type", param: "content-type" } },
    });
    if (!answer.ok) expect(answer.error.error.message).toContain("Content-Type: application/json");
    // Named by the header, it goes to the engine as it is.
    expect(resolveModel({ ...form, "snooze-model": "qwen" }, body({}), names)).toMatchObject({ ok: true });
  });

  test("a form upload names its model in a field; an alias there is to be renamed by the caller", () => {
    const multipart = { "content-type": "multipart/form-data; boundary=x" };
    const raw = Buffer.from("(the form, read by the caller)");
    expect(resolveModel(multipart, raw, names, undefined, { model: "qwen", stream: false })).toEqual({
      ok: true,
      model: "qwen",
      body: raw,
      stream: false,
      requested: "qwen",
      sent: "qwen",
    });
    expect(resolveModel(multipart, raw, names, undefined, { model: "q", stream: true })).toEqual({
      ok: true,
      model: "qwen",
      body: raw,
      stream: true,
      renamed: "qwen",
      requested: "q",
      sent: "qwen",
    });
    expect(resolveModel(multipart, raw, names, undefined, { model: "x", stream: false })).toMatchObject({
      ok: false,
      status: 404,
    });
    expect(resolveModel(multipart, raw, names, undefined, { stream: false })).toMatchObject({
      ok: false,
      status: 400,
      error: { error: { code: "missing_model" } },
    });
  });

  test("what the client asked for and what the engine is sent, for the spans' gen_ai.request.model", () => {
    expect(resolveModel(json, body({ model: "q" }), names, () => "Qwen/Qwen2.5-7B")).toMatchObject({
      model: "qwen",
      requested: "q",
      sent: "Qwen/Qwen2.5-7B",
    });
    expect(resolveModel(json, body({ model: "qwen" }), names)).toMatchObject({
      requested: "qwen",
      sent: "qwen",
    });
    // Named by the header only: the body names no model for the engine.
    const answer = resolveModel({ ...json, "snooze-model": "q" }, body({ prompt: "hi" }), names);
    expect(answer).toMatchObject({ model: "qwen", requested: "q" });
    expect(answer.ok && answer.sent).toBeUndefined();
  });
});

test("an empty `model` is a 400 missing_model that says it is empty, not that the request names none", () => {
  // Found by an outside tester: `"model": ""` was told to set `model`, which it had.
  const empty = resolveModel({ ...json, host: "localhost" }, body({ model: "", messages: [] }), names);
  expect(empty).toMatchObject({
    ok: false,
    status: 400,
    error: {
      error: {
        code: "missing_model",
        param: "model",
        message: expect.stringMatching(/^The request's `model` is empty: set it to a model's id or alias/),
      },
    },
  });
  // A Host that names a model still routes it, as when `model` is absent.
  const byHost = resolveModel({ ...json, host: "llama:8080" }, body({ model: "" }), names);
  expect(byHost.ok && byHost.model).toBe("llama");
});
