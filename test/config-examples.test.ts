import { expect, test } from "vitest";
import { loadConfigFile } from "../lib/settings/index.ts";

test.each(["snooze.yaml", "config/snooze.vllm.example.yaml"])("%s is a valid settings file", async (file) => {
  const config = await loadConfigFile(file);
  expect(config.models.size).toBeGreaterThanOrEqual(3);
});
