import { expect, test } from "vitest";
import { Harness } from "../test/support/autoscaler-harness.ts";
import { localAdmin } from "./local-snooze.ts";

test("the local admin's prewarm wakes the model and keeps it awake within its prewarmBudget", async () => {
  const h = new Harness(
    `
models:
  a:
    command: [engine, "\${PORT}"]
    prewarmBudget: 10m
`,
    { autoUp: 30_000 },
  );
  const admin = localAdmin(h.autoscaler);
  const done = admin.prewarm!("a", 60 * 60_000);
  await h.advance(31_000);
  await done;
  expect(h.controller("a").tier).toBe("ready");
  expect(h.controller("a").state().learning!.prewarms.active).toMatchObject({ kind: "explicit" });
  await h.advance(9 * 60_000);
  expect(h.controller("a").tier).toBe("ready");
  await h.advance(60_000 + 5_000);
  expect(h.controller("a").tier).toBe("asleep-1");
});
