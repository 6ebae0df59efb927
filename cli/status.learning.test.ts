import { expect, test } from "vitest";
import type { AdminModelView } from "../activator/admin.ts";
import { formatTable } from "./status.ts";

test("with the control plane's GPU-seconds, the table shows each model's awake time and what it saved", () => {
  const now = Date.parse("2026-01-01T00:01:00Z");
  const model = (id: string, learning?: AdminModelView["learning"]): AdminModelView => ({
    id,
    aliases: [],
    tier: "asleep-1",
    since: "2026-01-01T00:00:00Z",
    replicas: [],
    held: 0,
    inFlight: 0,
    ...(learning ? { learning } : {}),
  });
  const learning = {
    gpuSeconds: { awake: 5_400, asleep: 30_600, saved: 30_600 },
    prewarms: { hit: 2, wasted: 1, budgetLeftMs: 0 },
  };
  const lines = formatTable([model("qwen", learning), model("other")], now).split("\n");
  expect(lines[0]).toMatch(/LAST START +GPU AWAKE +SLOT/);
  expect(lines[1]).toContain("1h30m (saved 8h30m)");
  expect(lines[2]).toMatch(/- +- +-$/);
});
