import { expect, test } from "vitest";
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
