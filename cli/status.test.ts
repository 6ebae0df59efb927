import { expect, test } from "vitest";
import type { AdminModelView } from "../activator/admin.ts";
import { formatNext, formatStatus, formatTable } from "./status.ts";

test("the status table lines up its columns and says how long each tier has lasted", () => {
  const now = Date.parse("2026-01-01T00:01:00Z");
  const table = formatTable(
    [
      {
        id: "qwen",
        aliases: [],
        tier: "ready",
        since: "2026-01-01T00:00:00Z",
        replicas: [],
        held: 0,
        inFlight: 2,
        lastWakeMs: 850,
        nextChange: { tier: "asleep-1", at: "2026-01-01T00:01:12Z" },
      },
      {
        id: "llama-3.1-8b",
        aliases: [],
        tier: "asleep-1",
        since: "2026-01-01T00:00:30Z",
        replicas: [],
        held: 3,
        inFlight: 0,
        slot: "gpu0",
        nextChange: { tier: "cold", at: "2026-01-01T00:11:00Z" },
      },
    ],
    now,
  );
  expect(table.split("\n")).toEqual([
    "MODEL         TIER      FOR  NEXT           HELD  IN-FLIGHT  LAST WAKE  LAST START  SLOT  LAST ERROR",
    "qwen          ready     1m   sleeps in 12s  0     2          850ms      -           -",
    "llama-3.1-8b  asleep-1  30s  stops in 10m   3     0          -          -           gpu0",
  ]);
});

test("the NEXT column says what the ladder does next on its own, and when", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  const model = (tier: AdminModelView["tier"], next?: AdminModelView["nextChange"]): AdminModelView => ({
    id: "qwen",
    aliases: [],
    tier,
    since: "2026-01-01T00:00:00Z",
    replicas: [],
    held: 0,
    inFlight: 0,
    ...(next ? { nextChange: next } : {}),
  });
  expect(formatNext(model("ready", { tier: "asleep-2", at: "2026-01-01T00:00:30Z" }), now)).toBe(
    "sleeps in 30s",
  );
  expect(formatNext(model("asleep-1", { tier: "asleep-2", at: "2026-01-01T00:02:00Z" }), now)).toBe(
    "sleeps deeper in 2m",
  );
  expect(formatNext(model("ready", { tier: "cold", at: "2025-12-31T23:59:59Z" }), now)).toBe("stops now");
  expect(formatNext(model("cold"), now)).toBe("-");
  // A back-off after failures: when the next try may be (found by an outside tester: NEXT said "-").
  expect(formatNext({ ...model("cold"), retryAt: "2026-01-01T00:00:40Z" }, now)).toBe("retry in 40s");
  expect(formatNext({ ...model("cold"), retryAt: "2025-12-31T23:59:59Z" }, now)).toBe("-");
});

test("a refused reload of the settings is said under the table, until one applies", () => {
  // Found by an outside tester: `snooze status` looked normal while the file on disk was not what ran.
  const now = Date.parse("2026-01-01T00:01:00Z");
  const models: AdminModelView[] = [
    {
      id: "qwen",
      aliases: [],
      tier: "cold",
      since: "2026-01-01T00:00:00Z",
      replicas: [],
      held: 0,
      inFlight: 0,
    },
  ];
  const table = formatTable(models, now);
  expect(formatStatus({ models }, now)).toBe(table);
  const text = formatStatus(
    {
      models,
      reloadFailure: {
        at: "2026-01-01T00:00:48Z",
        cause: "SIGHUP",
        file: "snooze.yaml",
        problems: ['snooze.yaml:4:5: models.qwen.sleepAfter: expected a duration, not "soon\x1b[2J"'],
      },
    },
    now,
  );
  expect(text.split("\n").slice(-3)).toEqual([
    "",
    "The settings file snooze.yaml was refused 12s ago (SIGHUP); Snooze runs the settings it had:",
    '  snooze.yaml:4:5: models.qwen.sleepAfter: expected a duration, not "soon\\x1b[2J"',
  ]);
});

test("the status table lines up names a terminal shows two columns wide, or with combining marks", () => {
  // Found by a probe: cells were padded by UTF-16 length, so a Chinese name (each character two
  // columns on a terminal) or a name in NFD (an accent is a character of no width) pushed every
  // column after it out of line.
  const now = Date.parse("2026-01-01T00:01:00Z");
  const model = (id: string): AdminModelView => ({
    id,
    aliases: [],
    tier: "cold",
    since: "2026-01-01T00:00:00Z",
    replicas: [],
    held: 0,
    inFlight: 0,
  });
  const lines = formatTable(
    [model("通义千问"), model("cafe\u0301"), model("qwen"), model("🦙-8b")],
    now,
  ).split("\n");
  // Where TIER begins, counted in terminal columns: the same on every line.
  const starts = lines.map((line) => columns(line.slice(0, line.search(/ (TIER|cold)/) + 1)));
  expect(new Set(starts).size).toBe(1);
  expect(lines[1]).toMatch(/^通义千问 {2}cold/);
  expect(lines[2]).toMatch(/^cafe\u0301 {6}cold/);
});

/** Terminal columns as the test counts them: CJK and emoji 2, a combining mark 0. */
function columns(text: string): number {
  let width = 0;
  for (const char of text)
    width += /\p{M}/u.test(char) ? 0 : /[\u4e00-\u9fff]|\p{Emoji_Presentation}/u.test(char) ? 2 : 1;
  return width;
}
