import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { metricValue, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * A burst of reloads (found by an outside tester: 300 SIGHUPs from a shell loop made 108 reloads of
 * `snooze serve`, one after another, each reading and parsing the file on the event loop). How many
 * SIGHUPs the kernel delivers apart depends on the scheduler, so the burst is asked of the reloads
 * directly, as the SIGHUP handler asks them.
 */
let snooze: LocalSnooze | undefined;
let dir: string | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  if (dir) rmSync(dir, { recursive: true, force: true });
  snooze = dir = undefined;
});

test("reloads asked while one waits for its turn join it: a burst behind a reload under way is one more", async () => {
  const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n`;
  snooze = await startWith(yaml);
  dir = mkdtempSync(join(tmpdir(), "snooze-reload-burst-"));
  const file = join(dir, "snooze.yaml");
  writeFileSync(file, yaml.replace("qwen:", "qwen:\n    sleepAfter: 1m"));
  const models = snooze.models!;
  const first = models.reload(file, "SIGHUP");
  // The first one has begun: it reads the file.
  await Promise.resolve();
  const burst = Array.from({ length: 50 }, () => models.reload(file, "SIGHUP"));
  const results = await Promise.all([first, ...burst]);
  expect(results[0]!.result).toBe("applied");
  // The rest read the file after the whole burst, once: it says what the first applied.
  expect(new Set(results.slice(1))).toEqual(new Set([results[1]]));
  expect(results[1]!.result).toBe("unchanged");
  const text = await (await fetch(`${snooze.url}/metrics`)).text();
  expect(metricValue(text, "snooze_config_reloads_total")).toBe(2);
  // A reload asked after those is one of its own.
  writeFileSync(file, yaml);
  expect((await models.reload(file, "SIGHUP")).result).toBe("applied");
});

test("a reload whose file is still parsed when the shutdown begins applies nothing: no engine starts as they stop", async () => {
  // A large file is parsed on a worker thread, for seconds: a SIGTERM can come meanwhile.
  const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n`;
  snooze = await startWith(yaml);
  dir = mkdtempSync(join(tmpdir(), "snooze-reload-burst-"));
  const file = join(dir, "snooze.yaml");
  let large = `${yaml}  gemma:\n    command: ${simCommand()}\n`;
  for (let i = 0; large.length < 64 * 1024; i++) large += `x-own-${i}: &own${i} {a: "value ${i}"}\n`;
  writeFileSync(file, large);
  const models = snooze.models!;
  const reload = models.reload(file, "SIGHUP");
  // Read by now, and on the worker thread (which takes longer than this to start).
  await new Promise((resolve) => setTimeout(resolve, 100));
  const closed = snooze.close(1_000);
  expect((await reload).result).toBe("dropped");
  await closed;
  expect([...models.config.models.keys()]).toEqual(["qwen"]);
  expect((await models.reload(file, "SIGHUP")).result).toBe("dropped");
});
