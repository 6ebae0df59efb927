import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { createLogger, silentLogger } from "../../lib/log.ts";
import { defaultStateDir, EngineRecords, stopLeftovers } from "./engine-records.ts";

test("the default state directory: $SNOOZE_STATE_DIR, else an absolute $XDG_STATE_HOME, else ~/.local/state", () => {
  expect(defaultStateDir({ SNOOZE_STATE_DIR: "/srv/snooze", XDG_STATE_HOME: "/x" })).toBe("/srv/snooze");
  expect(defaultStateDir({ XDG_STATE_HOME: "/home/u/.state" })).toBe("/home/u/.state/snooze");
  const home = join(homedir(), ".local", "state", "snooze");
  expect(defaultStateDir({ SNOOZE_STATE_DIR: "", XDG_STATE_HOME: "" })).toBe(home);
  // Found by an outside tester: a relative one, which the XDG spec says to ignore, put the state
  // under the directory `snooze serve` was started from.
  expect(defaultStateDir({ XDG_STATE_HOME: "state" })).toBe(home);
});

test("a record that cannot be written (a full disk, here a directory in the file's place) leaves no temporary file behind (found by an outside tester)", () => {
  const dir = mkdtempSync(join(tmpdir(), "snooze-records-"));
  try {
    mkdirSync(join(dir, `serve-${process.pid}.json`));
    const records = new EngineRecords(dir, silentLogger);
    records.add({
      model: "m",
      replica: "m-1",
      pgid: 1234,
      startTime: "1",
      token: "t",
      port: 20001,
      startedAt: new Date(0).toISOString(),
      command: "engine",
    });
    expect(readdirSync(dir)).toEqual([`serve-${process.pid}.json`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an unreadable record of a Snooze that is gone is warned of once: set aside as `.unreadable`, kept to be read (found by an outside tester: warned at every start)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "snooze-records-"));
  try {
    const gone = join(dir, "serve-999999999.json");
    const live = join(dir, `serve-${process.pid}.json`);
    writeFileSync(gone, '{"version":1,"snooze":{"pid":9999');
    writeFileSync(live, "{truncated");
    const start = async () => {
      const lines: Record<string, unknown>[] = [];
      const log = createLogger({}, (line) => lines.push(JSON.parse(line)), "debug");
      await expect(stopLeftovers(dir, log, 1_000)).resolves.toEqual([]);
      return lines.filter((line) => line.msg === "ignoring an unreadable record of engines");
    };
    const first = await start();
    expect(first).toHaveLength(2);
    expect(first).toContainEqual(expect.objectContaining({ file: gone, movedTo: `${gone}.unreadable` }));
    // A running Snooze's record is its own: left where it is, whatever it holds.
    expect(first.find((line) => line.file === live)).not.toHaveProperty("movedTo");
    expect(readdirSync(dir).sort()).toEqual([`serve-${process.pid}.json`, "serve-999999999.json.unreadable"]);
    expect((await start()).map((line) => line.file)).toEqual([live]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
