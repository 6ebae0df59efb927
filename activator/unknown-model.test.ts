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
