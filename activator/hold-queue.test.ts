import { expect, test, vi } from "vitest";
import { HoldQueue } from "./hold-queue.ts";

test("first in, first out, bounded", () => {
  const queue = new HoldQueue<number>(2, 1_000, () => {});
  expect(queue.push(1)).toBeDefined();
  expect(queue.push(2)).toBeDefined();
  expect(queue.push(3)).toBeUndefined();
  expect(queue.shift()?.value).toBe(1);
  expect(queue.push(4)).toBeDefined();
  expect(queue.drain().map((h) => h.value)).toEqual([2, 4]);
  expect(queue.length).toBe(0);
});

test("a request admitted once already (resent after its engine failed under it) is not refused by a full queue", () => {
  const queue = new HoldQueue<number>(1, 1_000, () => {});
  expect(queue.push(1)).toBeDefined();
  expect(queue.push(2)).toBeUndefined();
  expect(queue.push(3, Date.now(), true)).toBeDefined();
  expect(queue.drain().map((h) => h.value)).toEqual([1, 3]);
});

test("entries past their budget expire in order", () => {
  vi.useFakeTimers();
  try {
    const expired: number[] = [];
    const queue = new HoldQueue<number>(10, 1_000, (item) => expired.push(item.value));
    queue.push(1, Date.now());
    vi.advanceTimersByTime(500);
    queue.push(2, Date.now());
    vi.advanceTimersByTime(500);
    expect(expired).toEqual([1]);
    vi.advanceTimersByTime(500);
    expect(expired).toEqual([1, 2]);
    expect(queue.length).toBe(0);
  } finally {
    vi.useRealTimers();
  }
});

test("a removed entry does not expire", () => {
  vi.useFakeTimers();
  try {
    const expired: number[] = [];
    const queue = new HoldQueue<number>(10, 1_000, (item) => expired.push(item.value));
    const first = queue.push(1, Date.now())!;
    queue.push(2, Date.now() + 10);
    expect(queue.remove(first)).toBe(true);
    vi.advanceTimersByTime(1_005);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(10);
    expect(expired).toEqual([2]);
  } finally {
    vi.useRealTimers();
  }
});
