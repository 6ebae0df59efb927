import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { afterEach, describe, expect, test } from "vitest";
import type { LearningSnapshot } from "../../lib/learning-snapshot.ts";
import { createLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { FakePlatform } from "../../test/support/fake-platform.ts";
import { ManualClock } from "../../test/support/manual-clock.ts";
import { localActivator, localAutoscaler } from "./control-plane.ts";
import { learningFile, learningFileName } from "./learning-file.ts";

/** A model's learning history in local mode: kept in the state directory across restarts. */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "snooze-learning-"));
  dirs.push(dir);
  return dir;
}

function capture() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({}, (line) => lines.push(JSON.parse(line)), "debug");
  return { log, lines };
}

const yaml = `
models:
  a:
    command: [engine, "\${PORT}"]
`;

/** One `snooze serve` life: the control plane over the fake platform, on a manual clock. */
function serve(dir: string, clock: ManualClock, log = capture().log) {
  const config = parseConfig(yaml, "snooze.yaml");
  const platform = new FakePlatform(config.models.keys(), { clock, autoUp: true });
  return localAutoscaler({ config, platform, log, registry: new Registry(), clock, stateDir: dir });
}

describe("the learning file", () => {
  test("a save that fails (a full disk, here a directory in the file's place) leaves no temporary file behind (found by an outside tester)", () => {
    // Named by pid, one was left by every Snooze that could not save at its shutdown, on a disk
    // already full.
    const dir = stateDir();
    const store = learningFile(dir, capture().log);
    mkdirSync(join(dir, learningFileName));
    expect(() => store.save(new Map())).toThrow();
    expect(readdirSync(dir)).toEqual([learningFileName]);
  });

  test("missing: every model starts with no history, and the log says so", () => {
    const dir = stateDir();
    const { log, lines } = capture();
    const store = learningFile(dir, log);
    expect(store.load("a")).toBeUndefined();
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: "info",
        msg: "no learning history yet; every model starts with none",
      }),
    );
  });

  test("corrupt: every model starts with no history, the log says why, the file is set aside", () => {
    const dir = stateDir();
    const path = join(dir, learningFileName);
    writeFileSync(path, '{"version": 1, "models": {"a": ');
    const { log, lines } = capture();
    const store = learningFile(dir, log);
    expect(store.load("a")).toBeUndefined();
    const warning = lines.find(
      (l) => l.msg === "the learning history is corrupt; every model starts with none",
    );
    expect(warning).toMatchObject({ level: "warn", file: path });
    expect(String(warning!.reason)).toMatch(/^not JSON/);
    expect(existsSync(`${path}.corrupt`)).toBe(true);
    // A file of another shape is refused the same way.
    writeFileSync(path, JSON.stringify({ version: 7, models: {} }));
    const again = capture();
    learningFile(dir, again.log);
    expect(again.lines.find((l) => l.level === "warn")!.reason).toBe("unknown version 7 (expected 1)");
  });

  test("a model named like an object's own members (constructor, toString, __proto__) finds only its own record", () => {
    // Found by an outside tester: `constructor` found Object's constructor, and the log said the
    // history was "not usable … received function".
    const dir = stateDir();
    writeFileSync(join(dir, learningFileName), JSON.stringify({ version: 1, models: {} }));
    const store = learningFile(dir, capture().log);
    for (const name of ["constructor", "toString", "hasOwnProperty", "__proto__"])
      expect(store.load(name), name).toBeUndefined();
    const snapshot = { version: 1 } as unknown as LearningSnapshot;
    store.save(
      new Map([
        ["__proto__", snapshot],
        ["constructor", snapshot],
      ]),
    );
    const again = learningFile(dir, capture().log);
    expect(again.load("__proto__")).toEqual(snapshot);
    expect(again.load("constructor")).toEqual(snapshot);
    expect(again.load("toString")).toBeUndefined();
  });

  test("a model's record that does not parse is refused alone, with the reason", () => {
    const dir = stateDir();
    writeFileSync(
      join(dir, learningFileName),
      JSON.stringify({ version: 1, models: { a: { version: 1, updated: "yesterday", arrivals: "x" } } }),
    );
    const { log, lines } = capture();
    const clock = new ManualClock();
    const autoscaler = serve(dir, clock, log);
    const warning = lines.find((l) => l.msg === "learning history not usable; starting with none")!;
    expect(warning).toMatchObject({ level: "warn", model: "a" });
    expect(String(warning.reason)).toMatch(/updated/);
    expect(autoscaler.controller("a")!.learner.history.exposureWeeks).toBe(0);
    autoscaler.close();
  });

  test("what a model learned survives a restart; the downtime in between is not counted as observed", async () => {
    const dir = stateDir();
    const clock = new ManualClock();
    const first = serve(dir, clock);
    const c = first.controller("a")!;
    for (let i = 0; i < 3; i++) {
      await clock.advanceAndSettle(3_600_000);
      first.demand(localActivator, "a");
      await clock.settle();
      first.stats(localActivator, "a", { inFlight: 1, held: 0 });
      await clock.advanceAndSettle(10_000);
      first.stats(localActivator, "a", { inFlight: 0, held: 0 });
      await clock.settle();
    }
    const before = c.learningSnapshot(true);
    expect(before.arrivals).not.toBe("");
    expect(before.durations?.start).toBeDefined();
    first.close(); // writes the file
    const kept = JSON.parse(readFileSync(join(dir, learningFileName), "utf8"));
    expect(kept.models.a.arrivals).toBe(before.arrivals);

    // Down for a day, then up again.
    await clock.advanceAndSettle(86_400_000);
    const { log, lines } = capture();
    const second = serve(dir, clock, log);
    expect(lines).toContainEqual(expect.objectContaining({ msg: "learning history restored", model: "a" }));
    const after = second.controller("a")!.learningSnapshot(true);
    expect(after.durations).toEqual(before.durations);
    // One day of decay, and no exposure for the day it was down.
    expect(after.exposureWeeks).toBeCloseTo(before.exposureWeeks * 0.5 ** (1 / 14), 3);
    second.close();
  });
});
