import { expect, test } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import type { SlotStatus } from "../../lib/slot-status.ts";
import { ManualClock } from "../../test/support/manual-clock.ts";
import { refusingClient } from "../../test/support/refusing-kube-client.ts";
import { SlotStatusWriter } from "./slot-status-writer.ts";

const settle = () => new Promise((resolve) => setImmediate(resolve));

function writer(refuse: number[]) {
  const clock = new ManualClock();
  const { client, patches } = refusingClient(refuse);
  let holding = true;
  let status: SlotStatus = {
    name: "gpu",
    policy: "fifo",
    members: ["ml/a", "ml/b"],
    resident: "ml/a",
    waiting: [],
    swaps: 0,
    maxResidents: 1,
  };
  const w = new SlotStatusWriter({
    client,
    log: silentLogger,
    clock,
    namespace: "ml",
    resource: () =>
      ({
        apiVersion: "snooze.dev/v1alpha1",
        kind: "Slot",
        metadata: { name: "gpu", namespace: "ml", resourceVersion: "7" },
        spec: {},
      }) as never,
    status: () => status,
    holding: () => holding,
  });
  return {
    w,
    clock,
    patches,
    set: (s: Partial<SlotStatus>) => {
      status = { ...status, ...s };
    },
    standDown: () => {
      holding = false;
    },
  };
}

test("a Slot status write the API server refuses (429, 500) is made again with back-off, not at the slot's next change", async () => {
  // Before: refused once, it waited for the slot's next change, which may never come (a slot that
  // sits still after a swap would keep saying the swap was under way).
  const { w, clock, patches } = writer([429, 500]);
  w.write();
  await settle();
  expect(patches).toHaveLength(0);
  await clock.advanceAndSettle(999);
  expect(patches).toHaveLength(0);
  await clock.advanceAndSettle(1);
  await settle();
  expect(patches).toHaveLength(0); // refused again (500): the next try in 2 s
  await clock.advanceAndSettle(2_000);
  await settle();
  expect(patches).toHaveLength(1);
  expect(patches[0]).toMatchObject({ status: { resident: "a", members: ["a", "b"] } });
});

test("a retry writes the slot's status as it is then; none once this process no longer holds the slot", async () => {
  const first = writer([503]);
  first.w.write();
  await settle();
  first.set({ resident: "ml/b", swaps: 1 });
  await first.clock.advanceAndSettle(1_000);
  await settle();
  expect(first.patches).toEqual([
    expect.objectContaining({ status: expect.objectContaining({ resident: "b" }) }),
  ]);

  const second = writer([503]);
  second.w.write();
  await settle();
  second.standDown();
  await second.clock.advanceAndSettle(60_000);
  await settle();
  expect(second.patches).toHaveLength(0);
});

test("a conflict (409) waits for the object the watch brings: no timed retry", async () => {
  const { w, clock, patches } = writer([409]);
  w.write();
  await settle();
  await clock.advanceAndSettle(60_000);
  await settle();
  expect(patches).toHaveLength(0);
  w.write();
  await settle();
  expect(patches).toHaveLength(1);
});
