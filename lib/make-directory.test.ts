import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { makeDirectory, unwritableDirectory } from "./make-directory.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), "snooze-mkdir-"));
  dirs.push(dir);
  return dir;
};

test("makes the missing directories, with the mode; an existing one is fine", () => {
  const root = scratch();
  const deep = join(root, "a", "b", "c");
  makeDirectory(deep, 0o700);
  expect(statSync(deep).isDirectory()).toBe(true);
  expect(statSync(join(root, "a")).mode & 0o777).toBe(0o700);
  makeDirectory(deep);
  makeDirectory(root);
});

test("a path it cannot make throws the reason at once: under /proc (where Node's recursive mkdir spins), under a file", () => {
  expect(() => makeDirectory("/proc/snooze-no-such/state")).toThrow(/ENOENT/);
  const file = join(scratch(), "file");
  writeFileSync(file, "");
  expect(() => makeDirectory(join(file, "state"))).toThrow(/ENOTDIR/);
  expect(existsSync(join(file, "state"))).toBe(false);
});

test("a directory files cannot be kept in is found, with the system's reason; a good one is made and left empty", () => {
  expect(unwritableDirectory("/proc/x")).toMatch(/^ENOENT: .*mkdir '\/proc\/x'/);
  const file = join(scratch(), "file");
  writeFileSync(file, "");
  expect(unwritableDirectory(join(file, "state"))).toMatch(/ENOTDIR/);
  const good = join(scratch(), "state", "snooze");
  expect(unwritableDirectory(good, 0o700)).toBeUndefined();
  expect(statSync(good).mode & 0o777).toBe(0o700);
  expect(readdirSync(good)).toEqual([]);
});
