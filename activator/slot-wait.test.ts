import { describe, expect, test } from "vitest";
import { slotWait } from "./slot-wait.ts";

const member = (id: string, slot = "gpu0", sleep = true) => ({ id, slot, sleep, wakeTimeout: 120_000 });
const draining = (model: string, since: number, endsAt: number) =>
  ({ model, replica: `${model}-1`, tier: "draining", since, endsAt }) as const;

describe("slotWait", () => {
  test("no slot, or no other member leaving: nothing", () => {
    expect(
      slotWait(
        { id: "b", slot: undefined },
        [{ config: member("a"), event: draining("a", 0, 10_000) }],
        5_000,
      ),
    ).toBeUndefined();
    expect(slotWait(member("b"), [{ config: member("a") }], 5_000)).toBeUndefined();
    expect(
      slotWait(member("b"), [{ config: member("a", "gpu1"), event: draining("a", 0, 10_000) }], 5_000),
    ).toBeUndefined();
  });

  test("while the resident drains: until its drain's end, the sleep call after it named", () => {
    expect(slotWait(member("b"), [{ config: member("a"), event: draining("a", 0, 10_000) }], 4_000)).toEqual({
      reason:
        "the slot `gpu0`'s resident `a` is still draining and going to sleep (its drain ends within 6s, and its sleep call may take up to 2m)",
      leftMs: 6_000,
    });
  });

  test("past the drain: what is left of the sleep call's timeout (wakeTimeout, at least 30 s)", () => {
    expect(slotWait(member("b"), [{ config: member("a"), event: draining("a", 0, 10_000) }], 40_000)).toEqual(
      {
        reason:
          "the slot `gpu0`'s resident `a` is still going to sleep (its sleep call has run at least 30s and is given up within 1m30s, its engine then stopped)",
        leftMs: 90_000,
      },
    );
    const short = { ...member("a"), wakeTimeout: 5_000 };
    expect(slotWait(member("b"), [{ config: short, event: draining("a", 0, 10_000) }], 20_000)?.leftMs).toBe(
      20_000,
    );
  });

  test("a resident without sleep mode stops: its drain's end", () => {
    expect(
      slotWait(member("b"), [{ config: member("a", "gpu0", false), event: draining("a", 0, 10_000) }], 4_000),
    ).toEqual({ reason: "the slot `gpu0`'s resident `a` is still draining and stopping", leftMs: 6_000 });
  });
});
