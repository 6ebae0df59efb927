import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * What `/metrics` keeps of models and slots that config reloads took away (found by a probe: a
 * `snooze serve` whose reloads added a model, served it once and removed it again grew by about 60
 * series each time, for good, as its counters and histograms stayed).
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const command = simCommand(["--enable-sleep-mode"], 0.02);
const keep = `  keep:\n    command: ${command}\n`;

async function seriesOf(url: string): Promise<string[]> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((line) => line !== "" && !line.startsWith("#"));
}

async function ask(url: string, model: string): Promise<number> {
  const answer = await fetch(`${url}/v1/chat/completions`, chat(model));
  await answer.text();
  return answer.status;
}

async function reload(yaml: string): Promise<void> {
  expect(snooze!.models!.apply(parseConfig(yaml, "test.yaml")).result).toBe("applied");
  await snooze!.models!.settled();
}

test("a model and its slot that reloads added, served and removed leave no series; /metrics is as before", async () => {
  snooze = await startWith(`models:\n${keep}`);
  const { url } = snooze;
  expect(await ask(url, "keep")).toBe(200);
  const before = await seriesOf(url);

  for (const round of [1, 2, 3]) {
    await reload(
      `slots:\n  gpu${round}: {}\nmodels:\n${keep}  gone${round}:\n    command: ${command}\n    slot: gpu${round}\n`,
    );
    expect(await ask(url, `gone${round}`)).toBe(200);
    const serving = await seriesOf(url);
    expect(serving.some((line) => line.startsWith(`snooze_requests_total{model="gone${round}"`))).toBe(true);
    expect(serving.some((line) => line.includes(`slot="gpu${round}"`))).toBe(true);
    await reload(`models:\n${keep}`);
  }

  const after = await seriesOf(url);
  expect(after.filter((line) => /model="gone|slot="gpu/.test(line))).toEqual([]);
  const names = (lines: string[]) => lines.map((line) => line.slice(0, line.lastIndexOf(" "))).sort();
  expect(names(after)).toEqual(names(before));
});

test("a model moved to another slot keeps its series; the slot it left, now empty, leaves none", async () => {
  snooze = await startWith(
    `slots:\n  gpu0: {}\nmodels:\n  moved:\n    command: ${command}\n    slot: gpu0\n`,
  );
  const { url } = snooze;
  expect(await ask(url, "moved")).toBe(200);
  await reload(`slots:\n  gpu1: {}\nmodels:\n  moved:\n    command: ${command}\n    slot: gpu1\n`);
  expect(await ask(url, "moved")).toBe(200);
  const series = await seriesOf(url);
  expect(series.filter((line) => line.includes('slot="gpu0"'))).toEqual([]);
  expect(series.some((line) => line.startsWith('snooze_requests_total{model="moved",code="200"} 2'))).toBe(
    true,
  );
  expect(series.some((line) => line.includes('slot="gpu1"'))).toBe(true);
});
