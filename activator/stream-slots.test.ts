import { expect, test } from "vitest";
import { StreamSlots, streamToEnd } from "./stream-slots.ts";

test("the stream whose writes have waited longest gives its slot, else the oldest", () => {
  const a = { name: "a", openedAt: 1, stalledSince: undefined };
  const b = { name: "b", openedAt: 2, stalledSince: 50 };
  const c = { name: "c", openedAt: 3, stalledSince: 40 };
  const d = { name: "d", openedAt: 0, stalledSince: undefined };
  expect(streamToEnd([a, b, c, d])?.name).toBe("c");
  expect(streamToEnd([a, b, d])?.name).toBe("b");
  expect(streamToEnd([a, d])?.name).toBe("d");
  expect(streamToEnd([a])?.name).toBe("a");
  expect(streamToEnd([])).toBeUndefined();
});

test("a new stream always gets a slot: when all are taken, the one streamToEnd picks is ended", () => {
  const slots = new StreamSlots<{
    name: string;
    openedAt: number;
    stalledSince: number | undefined;
    end(): void;
  }>(2);
  const ended: string[] = [];
  const releases = new Map<string, () => void>();
  const open = (name: string, openedAt: number, stalledSince?: number) => {
    const stream = {
      name,
      openedAt,
      stalledSince,
      // As a real stream does: ending it closes it, and its close gives the slot back.
      end: () => {
        ended.push(name);
        releases.get(name)?.();
      },
    };
    releases.set(name, slots.take(stream));
  };
  open("a", 1);
  open("b", 2, 10);
  expect(slots.size).toBe(2);
  open("c", 3);
  // b's client left a write unread: b gives its slot, not the older a.
  expect(ended).toEqual(["b"]);
  open("d", 4);
  expect(ended).toEqual(["b", "a"]);
  expect(slots.size).toBe(2);
  // A stream that closes on its own gives its slot back: the next one ends none.
  releases.get("c")!();
  open("e", 5);
  expect(ended).toEqual(["b", "a"]);
  expect(slots.size).toBe(2);
});
