import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { ConfigError } from "../lib/settings/index.ts";
import { missingConfigText } from "./missing-config.ts";

const notThere = (file: string) =>
  new ConfigError(file, [], { cause: Object.assign(new Error("ENOENT"), { code: "ENOENT" }) });
let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("a file that is not there is said to be not there, and where a relative path was looked for", () => {
  expect(missingConfigText(notThere("/etc/none.yaml"), true)).toBe(
    "the settings file is not valid:\n/etc/none.yaml: (top level): cannot read the file: there is no such file",
  );
  expect(missingConfigText(notThere("none.yaml"), true, "/srv")).toMatch(
    /there is no such file \(a relative path is read from \/srv, the directory snooze serve runs in\)$/,
  );
});

test("a symbolic link whose target is gone is named as one, with its target", () => {
  // Found by an outside tester: "no such file" of a file that `ls` lists.
  dir = mkdtempSync(join(tmpdir(), "snooze-missing-config-"));
  symlinkSync("../moved/snooze.yaml", join(dir, "snooze.yaml"));
  expect(missingConfigText(notThere(join(dir, "snooze.yaml")), true)).toMatch(
    /cannot read the file: it is a symbolic link \(to \.\.\/moved\/snooze\.yaml\) that leads to no file$/,
  );
  expect(missingConfigText(notThere("snooze.yaml"), true, dir)).toMatch(
    /it is a symbolic link \(to \.\.\/moved\/snooze\.yaml\) that leads to no file \(a relative path is read from /,
  );
});
