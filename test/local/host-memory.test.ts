import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * The host-memory budget of the level-1 sleepers (`hostMemoryBudget`, each model's `hostMemory`)
 * holds after a reload too, with `snooze sim` engines: the sims' own state says where the weights are.
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const tierOf = (model: string) => snooze!.autoscaler.controller(model)!.tier;
const simState = async (model: string) => {
  const address = snooze!.autoscaler.controller(model)!.state().address!;
  return (await (await fetch(`http://${address}/sim/state`)).json()) as { sleepLevel: number };
};

test("a reload that raises the models' hostMemory past the budget demotes the longest asleep at once", async () => {
  // Found by a probe: the budget was checked against the sizes before the reload, and two sleepers
  // of 16Gi stayed at level 1 on a budget of 20Gi until some model next fell asleep or woke.
  const settings = (hostMemory: string) => `
hostMemoryBudget: 20Gi
defaults:
  sleepAfter: 100ms
  hostMemory: ${hostMemory}
models:
  first:
    command: ${simCommand(["--enable-sleep-mode"])}
  second:
    command: ${simCommand(["--enable-sleep-mode"])}
`;
  snooze = await startWith(settings("8Gi"));
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("first"))).status).toBe(200);
  await until(() => tierOf("first") === "asleep-1", 5_000, "first asleep");
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("second"))).status).toBe(200);
  await until(() => tierOf("second") === "asleep-1", 5_000, "second asleep");
  // 16Gi together: within the budget.
  expect(tierOf("first")).toBe("asleep-1");

  expect(snooze.models!.apply(parseConfig(settings("16Gi"), "test.yaml")).result).toBe("applied");
  await until(() => tierOf("first") === "asleep-2", 5_000, "first demoted");
  expect(tierOf("second")).toBe("asleep-1");
  expect((await simState("first")).sleepLevel).toBe(2);
  expect((await simState("second")).sleepLevel).toBe(1);
});
