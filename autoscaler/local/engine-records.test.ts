import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import { defaultStateDir, EngineRecords } from "./engine-records.ts";

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
