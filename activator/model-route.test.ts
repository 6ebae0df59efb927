import { expect, test } from "vitest";
import { parseConfig } from "../lib/settings/index.ts";
import { ModelRoute } from "./model-route.ts";

const config = parseConfig("models:\n  qwen:\n    command: [x, '${PORT}']\n").models.get("qwen")!;
const listener = { demand() {}, loadChanged() {} };

test("progress lines: an estimate when the activation has one, the time waited when not", () => {
  const route = new ModelRoute(config, listener);
  const since = performance.now() - 3_000;
  expect(route.progress(since)).toMatch(/^waiting for qwen, 3(\.\d)?s so far$/);
  route.apply({ model: "qwen", replica: "qwen-1", tier: "starting", since: Date.now() });
  expect(route.progress(since)).toMatch(/^starting qwen, 3(\.\d)?s so far$/);
  route.apply({
    model: "qwen",
    replica: "qwen-1",
    address: "127.0.0.1:1",
    tier: "waking",
    since: Date.now(),
    estimateMs: 2_000,
  });
  expect(route.progress(since)).toMatch(/^waking qwen, ~(2|1\.\d)s$/);
  void route.close();
});
