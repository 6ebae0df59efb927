import {
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { createLogger } from "../lib/log.ts";
import { until } from "../test/helpers/local-snooze.ts";
import { watchConfigFile } from "./config-watch.ts";

/** `--watch-config` on a real directory: saves, a directory deleted and made again, a file removed. */
let stop: (() => void) | undefined;
let root: string | undefined;
afterEach(() => {
  stop?.();
  if (root) rmSync(root, { recursive: true, force: true });
  stop = root = undefined;
});

function start() {
  root = mkdtempSync(join(tmpdir(), "snooze-watch-"));
  const directory = join(root, "config");
  const file = join(directory, "snooze.yaml");
  mkdirSync(directory);
  writeFileSync(file, "models: {}\n");
  const lines: string[] = [];
  let changes = 0;
  const watch = watchConfigFile(file, () => changes++, {
    log: createLogger({}, (line) => lines.push(line), "info"),
    debounceMs: 20,
    retryMs: 50,
  });
  stop = () => watch.close();
  return { directory, file, lines, changes: () => changes };
}

test("a save is seen; so is one after the directory was deleted and made again", async () => {
  const { directory, file, lines, changes } = start();
  await new Promise((resolve) => setTimeout(resolve, 100));
  writeFileSync(file, "models: {a: 1}\n");
  await until(() => changes() === 1, 5_000, "the first save");

  rmSync(directory, { recursive: true });
  await new Promise((resolve) => setTimeout(resolve, 200));
  mkdirSync(directory);
  writeFileSync(file, "models: {b: 2}\n");
  await until(() => changes() === 2, 5_000, "the file in the new directory");
  // And the new directory is watched: a later save is seen too.
  await new Promise((resolve) => setTimeout(resolve, 100));
  writeFileSync(file, "models: {c: 3}\n");
  await until(() => changes() === 3, 5_000, "a save in the new directory");
  expect(lines.join("")).toContain("watching the settings file's directory again");
});

test("a file removed for good is said once; written again, it is read", async () => {
  const { file, lines, changes } = start();
  await new Promise((resolve) => setTimeout(resolve, 100));
  rmSync(file);
  await until(() => lines.join("").includes("the settings file is gone"), 5_000, "the warning");
  writeFileSync(file, "models: {d: 4}\n");
  await until(() => changes() === 1, 5_000, "the file back");
  expect(lines.filter((line) => line.includes("the settings file is gone"))).toHaveLength(1);
  // Back with the very text it had is a change too: a reload refused while it was gone must end.
  await new Promise((resolve) => setTimeout(resolve, 100));
  rmSync(file);
  await until(() => lines.filter((line) => line.includes("is gone")).length === 2, 5_000, "gone again");
  writeFileSync(file, "models: {d: 4}\n");
  await until(() => changes() === 2, 5_000, "the same file back");
});

test("a file that is there but cannot be used is a change (the reload says why), not a file gone", async () => {
  // Found by an outside tester: a directory in the file's place, a 545 MB file or one that cannot
  // be read were all logged as "the settings file is gone" (or not at all), and nothing reloaded.
  const { file, lines, changes } = start();
  await new Promise((resolve) => setTimeout(resolve, 100));
  rmSync(file);
  mkdirSync(file);
  await until(() => changes() === 1, 5_000, "the directory in the file's place");
  rmSync(file, { recursive: true });
  writeFileSync(file, "");
  truncateSync(file, 545 * 1024 * 1024);
  await until(() => changes() === 2, 5_000, "the huge file");
  // The same problem again is no new change; the file made right is.
  truncateSync(file, 545 * 1024 * 1024);
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(changes()).toBe(2);
  writeFileSync(file, "models: {e: 5}\n");
  await until(() => changes() === 3, 5_000, "the file made right");
  expect(lines.join("")).not.toContain("the settings file is gone");
});

test("a link at the path: an edit of the file it leads to is seen, also after the link is pointed elsewhere", async () => {
  // Found by an outside tester: only the link's own directory was watched, so saving the file it
  // leads to (a dotfiles checkout, another folder) reloaded nothing until a SIGHUP.
  root = mkdtempSync(join(tmpdir(), "snooze-watch-"));
  const elsewhere = join(root, "dotfiles");
  mkdirSync(elsewhere);
  const real = join(elsewhere, "snooze.yaml");
  writeFileSync(real, "models: {}\n");
  const file = join(root, "snooze.yaml");
  symlinkSync(real, file);
  let changes = 0;
  const watch = watchConfigFile(file, () => changes++, {
    log: createLogger({}, () => {}, "info"),
    debounceMs: 20,
    retryMs: 50,
  });
  stop = () => watch.close();
  await new Promise((resolve) => setTimeout(resolve, 100));
  writeFileSync(real, "models: {a: 1}\n");
  await until(() => changes === 1, 5_000, "the edit of the file the link leads to");
  // An editor's save there (a new file renamed over it) too.
  writeFileSync(join(elsewhere, ".snooze.yaml.swp"), "models: {b: 2}\n");
  renameSync(join(elsewhere, ".snooze.yaml.swp"), real);
  await until(() => changes === 2, 5_000, "the save by rename");
  // Pointed at another file (in a third folder): that one's edits are seen from then on.
  const third = join(root, "other");
  mkdirSync(third);
  writeFileSync(join(third, "snooze.yaml"), "models: {c: 3}\n");
  rmSync(file);
  symlinkSync(join(third, "snooze.yaml"), file);
  await until(() => changes === 3, 5_000, "the link pointed elsewhere");
  await new Promise((resolve) => setTimeout(resolve, 100));
  writeFileSync(join(third, "snooze.yaml"), "models: {d: 4}\n");
  await until(() => changes === 4, 5_000, "an edit of the new target");
});
