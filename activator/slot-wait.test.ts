import { describe, expect, test } from "vitest";
import { slotRetryAfterMs, waitGapMs } from "../lib/slot-line.ts";
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
    });
  });

  test("past the drain: what is left of the sleep call's timeout (wakeTimeout, at least 30 s)", () => {
    expect(slotWait(member("b"), [{ config: member("a"), event: draining("a", 0, 10_000) }], 40_000)).toEqual(
      {
        reason:
          "the slot `gpu0`'s resident `a` is still going to sleep (its sleep call has run at least 30s and is given up within 1m30s, its engine then stopped)",
      },
    );
    const short = { ...member("a"), wakeTimeout: 5_000 };
    expect(
      slotWait(member("b"), [{ config: short, event: draining("a", 0, 10_000) }], 20_000)?.reason,
    ).toContain("given up within 20s");
  });

  test("a resident without sleep mode stops: its drain's end", () => {
    expect(
      slotWait(member("b"), [{ config: member("a", "gpu0", false), event: draining("a", 0, 10_000) }], 4_000),
    ).toEqual({ reason: "the slot `gpu0`'s resident `a` is still draining and stopping" });
  });
});

describe("slotWait while another member stays resident", () => {
  const event = (model: string, tier: "ready" | "starting" | "waking" | "asleep-1") =>
    ({ model, replica: `${model}-1`, tier, since: 0 }) as const;

  test("a ready resident: the slot's policy decides, and how the model keeps its place is said", () => {
    // Found by a probe: the request's 503 said nothing of the slot.
    expect(slotWait(member("b"), [{ config: member("a"), event: event("a", "ready") }], 4_000)).toEqual({
      reason:
        "the slot `gpu0`'s resident `a` (ready) keeps it until the slot's policy hands it over (a busy resident at the latest once this model has waited the slot's maxWait, counted from its first request or wake as long as requests or wakes for it come again within 5s)",
    });
  });

  test("another member starting or waking (a swap of its own): the same", () => {
    for (const tier of ["starting", "waking"] as const)
      expect(slotWait(member("b"), [{ config: member("c"), event: event("c", tier) }], 0)?.reason).toMatch(
        new RegExp(`resident \`c\` \\(${tier}\\) keeps it`),
      );
  });

  test("a member starting or waking is not interrupted, whatever maxWait: said, with when it is given up", () => {
    // Found by a probe: a request that had waited past maxWait for a member whose start never
    // ended was told only that maxWait bounds its wait, while the start held the slot for its
    // startTimeout.
    const c = { ...member("c"), startTimeout: 20_000 };
    expect(
      slotWait(member("b"), [{ config: c, event: { ...event("c", "starting"), since: 1_000 } }], 4_200),
    ).toEqual({
      reason:
        "the slot `gpu0`'s resident `c` (starting) keeps it until its start under way ends (it is not interrupted, whatever the slot's maxWait; it is given up within 16.8s), then until the slot's policy hands it over (a busy resident at the latest once this model has waited the slot's maxWait, counted from its first request or wake as long as requests or wakes for it come again within 5s)",
    });
    // A wake has its wakeTimeout (2m here).
    expect(slotWait(member("b"), [{ config: c, event: event("c", "waking") }], 60_000)?.reason).toContain(
      "until its wake under way ends (it is not interrupted, whatever the slot's maxWait; it is given up within 1m)",
    );
    // No timeout to tell (an unlimited startTimeout): only that it is not interrupted.
    const unlimited = { ...c, startTimeout: Number.POSITIVE_INFINITY };
    expect(
      slotWait(member("b"), [{ config: unlimited, event: event("c", "starting") }], 0)?.reason,
    ).toContain("until its start under way ends (it is not interrupted, whatever the slot's maxWait), then");
  });

  test("the retry every slot wait is told comes within the pause that ends a member's wait", () => {
    // A client that obeys it keeps the model's place: one told its own start (10 s unmeasured), or
    // the leaving resident's drain and sleep timeouts, waited anew each time, or came back after the
    // swap it had asked for was over and the slot gone back to a busy member (found by a probe).
    expect(slotRetryAfterMs).toBeLessThanOrEqual(waitGapMs - 3_000);
  });

  test("not when the model itself is resident, nor for asleep members or another slot's", () => {
    expect(
      slotWait(
        member("b"),
        [
          { config: member("b"), event: event("b", "waking") },
          { config: member("a"), event: event("a", "ready") },
        ],
        0,
      ),
    ).toBeUndefined();
    expect(
      slotWait(member("b"), [{ config: member("a"), event: event("a", "asleep-1") }], 0),
    ).toBeUndefined();
    expect(
      slotWait(member("b"), [{ config: member("a", "gpu1"), event: event("a", "ready") }], 0),
    ).toBeUndefined();
  });
});

describe("slotWait while the model's own engine drains", () => {
  const asleep = (model: string) => ({ model, replica: `${model}-1`, tier: "asleep-1", since: 0 }) as const;

  test("for a swap (another member, not resident, has requests held): it waits for the slot handed to that member", () => {
    // Found by a probe: its 503 said nothing of the slot, and its Retry-After was its own wake's.
    expect(
      slotWait(
        member("a"),
        [
          { config: member("a"), event: draining("a", 0, 10_000) },
          { config: member("b"), event: asleep("b"), held: 2 },
          { config: member("c"), event: asleep("c") },
        ],
        4_000,
      ),
    ).toEqual({
      reason: `its own engine drains to give the slot \`gpu0\` to \`b\` (a swap), and it has the slot again once the slot's policy hands it back (at the latest once this model has waited the slot's maxWait, counted from its first request or wake as long as requests or wakes for it come again within ${waitGapMs / 1000}s)`,
    });
    // A member never started (no event yet) is a target too.
    expect(
      slotWait(
        member("a"),
        [
          { config: member("a"), event: draining("a", 0, 10_000) },
          { config: member("b"), held: 1 },
        ],
        4_000,
      )?.reason,
    ).toContain("to give the slot `gpu0` to `b`");
  });

  test("for anything else (its idle sleep, a person's sleep, nobody waiting): nothing", () => {
    expect(
      slotWait(
        member("a"),
        [
          { config: member("a"), event: draining("a", 0, 10_000) },
          { config: member("b"), event: asleep("b"), held: 0 },
        ],
        4_000,
      ),
    ).toBeUndefined();
    expect(
      slotWait(member("a"), [{ config: member("a"), event: draining("a", 0, 10_000) }], 4_000),
    ).toBeUndefined();
  });
});
