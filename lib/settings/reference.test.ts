import { readFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { oversizeRefusal, parseConfig } from "./load.ts";
import { configurationReference } from "./reference.ts";

test("docs/configuration.md is generated from the schema and up to date", async () => {
  const committed = await readFile(new URL("../../docs/configuration.md", import.meta.url), "utf8");
  expect(committed, "run: node_modules/.bin/node hack/gen-config-docs.ts").toBe(configurationReference());
});

test("the problems the reference quotes are worded as the loader words them", async () => {
  const reference = await readFile(new URL("../../docs/configuration.md", import.meta.url), "utf8");
  // A duration without its unit, and a file far over the size limit (found by an outside tester:
  // the reference's lines had lost the ends the loader gives them, `not "…"` and its advice).
  const text = 'models:\n  qwen:\n    command: [vllm, serve, --port, "${PORT}"]\n    sleepAfter: 5 min\n';
  const [duration] = (() => {
    try {
      parseConfig(text, "snooze.yaml");
    } catch (error) {
      return (error as Error).message.split("\n");
    }
    return [];
  })();
  expect(duration).toMatch(/^snooze\.yaml:4:5: models\.qwen\.sleepAfter: /);
  expect(reference).toContain(`\`${duration}\``);
  expect(reference).toContain(`\`model.safetensors: (top level): ${oversizeRefusal(1.5 * 2 ** 30)}\``);
});
