import { expect, test } from "vitest";
import { modelStatusTier } from "./model-status-tier.ts";

const since = "2026-03-01T10:00:00Z";

test("a start whose pod does not exist yet is starting, as the status's phase says", () => {
  expect(modelStatusTier({ phase: "Starting", replicaTiers: [] })).toBe("starting");
  expect(modelStatusTier({ phase: "Starting" })).toBe("starting");
});

test("otherwise the most awake of its pods' tiers; cold with none", () => {
  expect(
    modelStatusTier({
      phase: "Waking",
      replicaTiers: [
        { pod: "a", tier: "asleep-1", since },
        { pod: "b", tier: "waking", since },
      ],
    }),
  ).toBe("waking");
  expect(modelStatusTier({ phase: "Asleep", replicaTiers: [{ pod: "a", tier: "asleep-2", since }] })).toBe(
    "asleep-2",
  );
  expect(modelStatusTier({ phase: "Cold", replicaTiers: [] })).toBe("cold");
  expect(modelStatusTier(undefined)).toBe("cold");
});
