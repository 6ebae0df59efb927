import { readFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { configurationReference } from "./reference.ts";

test("docs/configuration.md is generated from the schema and up to date", async () => {
  const committed = await readFile(new URL("../../docs/configuration.md", import.meta.url), "utf8");
  expect(committed, "run: node_modules/.bin/node hack/gen-config-docs.ts").toBe(configurationReference());
});
