import { readFileSync } from "node:fs";
import { expect, test } from "vitest";
import { parseProcStat, readProcStat } from "./proc-stat.ts";

/** A /proc/<pid>/stat line as Linux writes it (52 fields), with the given name and fields 3 to 5. */
const line = (comm: string, state = "S", ppid = 30989, pgrp = 30989) =>
  `30991 (${comm}) ${state} ${ppid} ${pgrp} 30142 0 -1 4194304 102 0 0 0 57 13 0 0 20 0 1 0 1317035 ` +
  "3133440 388 18446744073709551615 93925530304512 93925530324393 140723051927712 0 0 0 0 0 0 0 0 0 17 1 0 " +
  "0 0 0 0 93925530340400 93925530342016 93925732425728 140723051932355 140723051932375 140723051932375 " +
  "140723051933675 0\n";

test("the fields Snooze reads, by proc(5)'s numbers: utime 14, stime 15, starttime 22", () => {
  expect(parseProcStat(line("cat"))).toEqual({
    pid: 30991,
    comm: "cat",
    state: "S",
    ppid: 30989,
    pgrp: 30989,
    utime: 57,
    stime: 13,
    starttime: 1317035,
  });
});

test("a command name with spaces and `) (` in it shifts no field", () => {
  const stat = parseProcStat(line("a) (b c) S 1 2 (", "R", 7, 8));
  expect(stat).toMatchObject({
    comm: "a) (b c) S 1 2 (",
    state: "R",
    ppid: 7,
    pgrp: 8,
    utime: 57,
    starttime: 1317035,
  });
  expect(parseProcStat(line(" "))?.comm).toBe(" ");
  expect(parseProcStat(line(""))?.comm).toBe("");
});

test("a zombie is read as one, state Z", () => {
  expect(parseProcStat(line("node", "Z", 1, 1))).toMatchObject({ state: "Z", ppid: 1, pgrp: 1 });
});

test("text that is not a stat line is undefined", () => {
  for (const text of [
    "",
    "\n",
    "30991 cat S 1 1",
    "30991 (cat",
    "30991 (cat)",
    "(cat) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0",
    "x (cat) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0",
    // Cut short: no starttime.
    "30991 (cat) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1",
    // A field that is not a count, a state that is not one letter.
    line("cat", "S", Number.NaN),
    line("cat", "SS"),
    line("cat", ""),
  ]) {
    expect(parseProcStat(text), JSON.stringify(text)).toBeUndefined();
  }
});

test.runIf(process.platform === "linux")("this process's own stat, read for real", () => {
  const stat = readProcStat(process.pid);
  expect(stat).toMatchObject({ pid: process.pid, ppid: process.ppid });
  // Running, as its main thread reads the file; sleeping, should a worker thread run the tests.
  expect(stat!.state).toMatch(/^[RS]$/);
  expect(stat!.pgrp).toBeGreaterThan(0);
  // The command name is /proc/<pid>/comm's, cut to 15 bytes by the kernel.
  expect(stat!.comm).toBe(readFileSync(`/proc/${process.pid}/comm`, "utf8").trimEnd());
  expect(stat!.starttime).toBeGreaterThan(0);
  expect(stat!.utime + stat!.stime).toBeGreaterThan(0);
  // The start time is fixed; the CPU time only grows.
  const again = readProcStat(process.pid)!;
  expect(again.starttime).toBe(stat!.starttime);
  expect(again.utime + again.stime).toBeGreaterThanOrEqual(stat!.utime + stat!.stime);
});

test("a process that is not there is undefined", () => {
  // Above the largest pid Linux gives (2^22): never a process.
  expect(readProcStat(2 ** 22 + 1)).toBeUndefined();
});
