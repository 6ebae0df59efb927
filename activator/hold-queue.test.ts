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
  expect(queue.push(3, performance.now(), true)).toBeDefined();
  expect(queue.drain().map((h) => h.value)).toEqual([1, 3]);
});

test("entries past their budget expire in order", () => {
  vi.useFakeTimers();
  try {
    const expired: number[] = [];
    const queue = new HoldQueue<number>(10, 1_000, (item) => expired.push(item.value));
    queue.push(1);
    vi.advanceTimersByTime(500);
    queue.push(2);
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
    const first = queue.push(1)!;
    queue.push(2, performance.now() + 10);
    expect(queue.remove(first)).toBe(true);
    vi.advanceTimersByTime(1_005);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(10);
    expect(expired).toEqual([2]);
  } finally {
    vi.useRealTimers();
  }
});

test("the wall clock set back during a hold (an NTP step, a resumed VM) does not lengthen the budget", () => {
  vi.useFakeTimers();
  try {
    const expired: number[] = [];
    const queue = new HoldQueue<number>(10, 1_000, (item) => expired.push(item.value));
    queue.push(1);
    vi.setSystemTime(Date.now() - 3_600_000);
    vi.advanceTimersByTime(1_000);
    // Before: the deadline was a wall-clock time, an hour away again: held an hour and a second.
    expect(expired).toEqual([1]);
  } finally {
    vi.useRealTimers();
  }
});

test("the wall clock set forward during a hold does not end the holds behind the first early", () => {
  vi.useFakeTimers();
  try {
    const expired: number[] = [];
    const queue = new HoldQueue<number>(10, 1_000, (item) => expired.push(item.value));
    const first = queue.push(1)!;
    vi.advanceTimersByTime(500);
    queue.push(2);
    vi.setSystemTime(Date.now() + 3_600_000);
    // The first leaves (its client went): the timer is armed again for the second.
    queue.remove(first);
    vi.advanceTimersByTime(0);
    // Before: armed at its wall-clock deadline, an hour past already, so it was refused at once.
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(999);
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(expired).toEqual([2]);
  } finally {
    vi.useRealTimers();
  }
});
