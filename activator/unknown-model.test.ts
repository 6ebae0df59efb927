import { expect, test } from "vitest";
import { knownModels, unknownModel } from "./unknown-model.ts";

test("the known models are quoted one by one (an id may hold a comma), at most 50, then how many more", () => {
  // Found by an outside tester: ids `a,b` and `a,b-1` read as three or four models.
  expect(unknownModel("nosuch", ["a,b", "c:d", "a,b-1"]).error.message).toBe(
    "The model `nosuch` does not exist. Known models: `a,b`, `c:d`, `a,b-1`.",
  );
  const many = Array.from({ length: 120 }, (_, i) => `m${i}`);
  const listed = knownModels(many);
  expect(listed.startsWith("`m0`, `m1`,")).toBe(true);
  expect(listed).toContain("`m49` and 70 more (GET /v1/models lists them)");
  expect(listed).not.toContain("`m50`");
});

test("with no model at all the answer says so, not an empty list", () => {
  // Found by an outside tester: an activator with no Model yet (a cluster whose only Knative
  // revisions are not served) answered "Known models: ." with nothing between.
  expect(unknownModel("qwen", []).error.message).toBe("The model `qwen` does not exist. Known models: none.");
});

test("a name close to a model's id or alias is suggested; a name close to none is not", () => {
  // Found by an outside tester: `qwen3-8` or `Qwen3-8B` got only the list, which names no alias.
  const ids = ["qwen3-8b", "llama-3.1-8b"];
  const names = [...ids, "qwen", "llama"];
  expect(unknownModel("qwen3-8", ids, names).error).toMatchObject({
    code: "model_not_found",
    param: "model",
    message:
      "The model `qwen3-8` does not exist; did you mean `qwen3-8b`? Known models: `qwen3-8b`, `llama-3.1-8b`.",
  });
  expect(unknownModel("Qwen3-8B", ids, names).error.message).toContain("did you mean `qwen3-8b`?");
  expect(unknownModel("lama", ids, names).error.message).toContain("did you mean `llama`?");
  expect(unknownModel("mistral", ids, names).error.message).not.toContain("did you mean");
  // Without names of their own, the ids are compared (an iterator read once).
  expect(unknownModel("llama-3.1-7b", new Map(ids.map((id) => [id, id])).keys()).error.message).toBe(
    "The model `llama-3.1-7b` does not exist; did you mean `llama-3.1-8b`? Known models: `qwen3-8b`, `llama-3.1-8b`.",
  );
  // A name too long to be a typo of one is not compared at all.
  expect(unknownModel("q".repeat(10_000), ids, names).error.message).not.toContain("did you mean");
});
