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
  });

  test("the first label of Host", () => {
    const result = resolveModel({ host: "llama.models.example.com:8080" }, Buffer.alloc(0), names);
    expect(result.ok && result.model).toBe("llama");
  });

  test("errors: unknown, bad JSON, none", () => {
    expect(resolveModel(json, body({ model: "x" }), names)).toMatchObject({ ok: false, status: 404 });
    expect(resolveModel(json, Buffer.from("{"), names)).toMatchObject({ ok: false, status: 400 });
    expect(resolveModel({ host: "localhost" }, Buffer.alloc(0), names)).toMatchObject({
      ok: false,
      status: 400,
    });
  });
});
