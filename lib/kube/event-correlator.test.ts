import { describe, expect, test } from "vitest";
import { EventCorrelator } from "./event-correlator.ts";

const minute = 60_000;

test("a repeat within 6 minutes counts in the first Event's series; later, a new Event", () => {
  const c = new EventCorrelator();
  const first = c.observe("uid-1", "Woke", "qwen", 0);
  expect(first).toEqual({ kind: "create", name: expect.stringMatching(/^qwen\.[0-9a-f]+$/) });
  const name = (first as { name: string }).name;
  expect(c.observe("uid-1", "Woke", "qwen", 5 * minute)).toEqual({
    kind: "series",
    name,
    count: 2,
    lastObservedTime: 5 * minute,
  });
  // The window runs from the last repeat, as a series stays open while it is observed.
  expect(c.observe("uid-1", "Woke", "qwen", 10 * minute)).toMatchObject({ kind: "series", name, count: 3 });
  const later = c.observe("uid-1", "Woke", "qwen", 17 * minute);
  expect(later.kind).toBe("create");
  expect((later as { name: string }).name).not.toBe(name);
});

test("another reason, or another object, is another series", () => {
  const c = new EventCorrelator();
  expect(c.observe("uid-1", "Woke", "qwen", 0).kind).toBe("create");
  expect(c.observe("uid-1", "Slept", "qwen", 1).kind).toBe("create");
  expect(c.observe("uid-2", "Woke", "llama", 2).kind).toBe("create");
  expect(c.observe("uid-1", "Woke", "qwen", 3)).toMatchObject({ kind: "series", count: 2 });
});

test("two Events of one object in one millisecond get different names", () => {
  const c = new EventCorrelator();
  const a = c.observe("uid-1", "Stopped", "qwen", 1_000) as { name: string };
  const b = c.observe("uid-1", "Failed", "qwen", 1_000) as { name: string };
  expect(a.name).not.toBe(b.name);
});

test("a flood is rate-limited per object: 25 at once, then one per 5 minutes; other objects are not held back", () => {
  const c = new EventCorrelator();
  const kinds = Array.from({ length: 30 }, (_, i) => c.observe("uid-1", `R${i}`, "qwen", 0).kind);
  expect(kinds.filter((k) => k !== "drop")).toHaveLength(25);
  expect(kinds.slice(25)).toEqual(["drop", "drop", "drop", "drop", "drop"]);
  expect(c.observe("uid-2", "Woke", "llama", 0).kind).toBe("create");
  expect(c.observe("uid-1", "Later", "qwen", 4 * minute).kind).toBe("drop");
  expect(c.observe("uid-1", "Later", "qwen", 5 * minute).kind).toBe("create");
  expect(c.observe("uid-1", "Later2", "qwen", 5 * minute).kind).toBe("drop");
});

test("a forgotten series (its Event is gone) starts anew", () => {
  const c = new EventCorrelator();
  c.observe("uid-1", "Woke", "qwen", 0);
  c.forget("uid-1", "Woke");
  expect(c.observe("uid-1", "Woke", "qwen", 1).kind).toBe("create");
});

test("the state is bounded: past maxKeys the least recently used series go", () => {
  const c = new EventCorrelator({ maxKeys: 2, burst: 100 });
  c.observe("a", "k", "a", 0);
  c.observe("b", "k", "b", 1);
  c.observe("a", "k", "a", 2);
  c.observe("c", "k", "c", 3);
  expect(c.observe("a", "k", "a", 4).kind).toBe("series");
  expect(c.observe("b", "k", "b", 5).kind).toBe("create");
});

describe("Event names: valid at the length limit of the object's name", () => {
  const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  // 2026: 16 hex digits of nanoseconds, as a real clock gives.
  const now = Date.UTC(2026, 11, 7);
  /** The name of a new Event about `object`, the `sequence`-th of this millisecond. */
  const eventName = (object: string, at: number, sequence: number) => {
    const c = new EventCorrelator({ burst: 100 });
    for (let i = 0; i < sequence; i++) c.observe(`uid-${object}`, `other-${i}`, object, at);
    return (c.observe(`uid-${object}`, "Woke", object, at) as { name: string }).name;
  };

  test("an object named with 253 characters gets an Event name of at most 253, its own, readable (found by an outside tester: the API server refused it)", () => {
    // Before, `<name>.<hex nanoseconds>` went past 253 for names over 236 characters.
    const names = [
      "q".repeat(253),
      `${"a".repeat(230)}-${"b".repeat(22)}`,
      `${"a".repeat(230)}-${"c".repeat(22)}`,
      `${"a".repeat(230)}.${"b".repeat(22)}`,
      "m".repeat(237),
    ];
    const events = names.map((name) => eventName(name, now, 0));
    for (const [i, event] of events.entries()) {
      expect(event.length, event).toBeLessThanOrEqual(253);
      expect(event).toMatch(dnsSubdomain);
      expect(event.startsWith(names[i]!.slice(0, 200))).toBe(true);
      // The time stays last, as client-go writes it.
      expect(event).toMatch(/\.[0-9a-f]{16}$/);
    }
    expect(new Set(events).size).toBe(names.length);
    // Two Events of one long-named object still differ.
    expect(eventName(names[0]!, now, 1)).not.toBe(events[0]);
  });

  test("a name that fits is kept as client-go writes it: <object name>.<hex nanoseconds>", () => {
    const fits = "n".repeat(236);
    expect(eventName(fits, now, 0)).toBe(`${fits}.${(BigInt(now) * 1_000_000n).toString(16)}`);
    expect(eventName(fits, now, 0)).toHaveLength(253);
    expect(eventName("qwen", now, 3)).toBe(`qwen.${(BigInt(now) * 1_000_000n + 3n).toString(16)}`);
  });
});
