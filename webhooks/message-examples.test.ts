import { readFileSync } from "node:fs";
import { expect, test } from "vitest";
import { messageExamples } from "./message-examples.ts";

test("docs/webhooks.md quotes every message word for word", () => {
  const docs = readFileSync(new URL("../docs/webhooks.md", import.meta.url), "utf8");
  for (const [name, message] of Object.entries(messageExamples())) expect(docs, name).toContain(message);
});
