import { expect, test } from "vitest";
import { formatTable } from "./status.ts";

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
      },
    ],
    now,
  );
  expect(table.split("\n")).toEqual([
    "MODEL         TIER      FOR  HELD  IN-FLIGHT  LAST WAKE  LAST START  SLOT  LAST ERROR",
    "qwen          ready     1m   0     2          850ms      -           -",
    "llama-3.1-8b  asleep-1  30s  3     0          -          -           gpu0",
  ]);
});
