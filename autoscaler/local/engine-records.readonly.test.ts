import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test, vi } from "vitest";
import { createLogger } from "../../lib/log.ts";
import { stopLeftovers } from "./engine-records.ts";

// A read-only disk, as root can have it in a test only by pretending: its records cannot be deleted.
const readOnly = new Set<string>();
vi.mock("node:fs", async (original) => {
  const fs = await original<typeof import("node:fs")>();
  const rmSync: typeof fs.rmSync = (path, options) => {
    if (readOnly.has(String(path)))
      throw Object.assign(new Error(`EROFS: read-only file system, rm '${String(path)}'`), { code: "EROFS" });
    return fs.rmSync(path, options);
  };
  return { ...fs, default: { ...fs, rmSync }, rmSync };
});

const dirs: string[] = [];
afterEach(() => {
  readOnly.clear();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

test("a record left by a dead Snooze in a state directory that cannot be written: start goes on, the log says so (found by an outside tester: snooze serve crashed with EROFS)", async () => {
  // The default state directory that cannot be written only warns ("a read-only home still
  // serves"): a record from before it became read-only was read, its engines stopped, and then
  // the record's deletion threw out of `snooze serve` at start.
  const dir = mkdtempSync(join(tmpdir(), "snooze-records-ro-"));
  dirs.push(dir);
  const file = join(dir, "serve-999999999.json");
  writeFileSync(
    file,
    JSON.stringify({ version: 1, snooze: { pid: 999_999_999, startTime: "1" }, engines: [] }),
  );
  readOnly.add(file);
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({}, (line) => lines.push(JSON.parse(line)), "debug");
  await expect(stopLeftovers(dir, log, 1_000)).resolves.toEqual([]);
  expect(lines).toContainEqual(
    expect.objectContaining({
      level: "warn",
      msg: "cannot delete the record of a snooze serve that is gone",
      file,
    }),
  );
});
