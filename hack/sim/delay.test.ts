import { afterEach, expect, test, vi } from "vitest";
import { maxTimerMs } from "../../lib/duration.ts";
import { delay } from "./delay.ts";

afterEach(() => {
  vi.useRealTimers();
});

test("a delay longer than one timer can wait is waited whole, in several (found by an outside tester: it ended at once)", async () => {
  vi.useFakeTimers();
  let done = false;
  void delay(2 * maxTimerMs + 5).then(() => {
    done = true;
  });
  await vi.advanceTimersByTimeAsync(maxTimerMs);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(maxTimerMs);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(5);
  expect(done).toBe(true);
});

test("an abort ends a long delay in its later timers too", async () => {
  vi.useFakeTimers();
  const controller = new AbortController();
  const waited = delay(2 * maxTimerMs, controller.signal);
  await vi.advanceTimersByTimeAsync(maxTimerMs + 1);
  controller.abort();
  await expect(waited).rejects.toThrow("aborted");
});
