import { homedir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { defaultStateDir } from "./engine-records.ts";

test("the default state directory: $SNOOZE_STATE_DIR, else an absolute $XDG_STATE_HOME, else ~/.local/state", () => {
  expect(defaultStateDir({ SNOOZE_STATE_DIR: "/srv/snooze", XDG_STATE_HOME: "/x" })).toBe("/srv/snooze");
  expect(defaultStateDir({ XDG_STATE_HOME: "/home/u/.state" })).toBe("/home/u/.state/snooze");
  const home = join(homedir(), ".local", "state", "snooze");
  expect(defaultStateDir({ SNOOZE_STATE_DIR: "", XDG_STATE_HOME: "" })).toBe(home);
  // Found by an outside tester: a relative one, which the XDG spec says to ignore, put the state
  // under the directory `snooze serve` was started from.
  expect(defaultStateDir({ XDG_STATE_HOME: "state" })).toBe(home);
});
