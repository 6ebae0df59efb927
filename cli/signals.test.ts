import { afterEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { type StopSignals, watchStopSignals } from "./signals.ts";

describe("watchStopSignals", () => {
  let stops: StopSignals | undefined;
  afterEach(() => {
    stops?.dispose();
    vi.useRealTimers();
  });

  it("ends the shutdown delay when it runs out", async () => {
    vi.useFakeTimers();
    stops = watchStopSignals(silentLogger, {}, { signals: ["SIGUSR2"] });
    let over = false;
    void stops.delay(5_000).then(() => (over = true));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(over).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(over).toBe(true);
  });

  it("ends the shutdown delay at a second stop signal, and leaves no timer behind", async () => {
    vi.useFakeTimers();
    stops = watchStopSignals(silentLogger, {}, { signals: ["SIGUSR2"] });
    process.emit("SIGUSR2", "SIGUSR2");
    expect(await stops.first).toBe("SIGUSR2");
    const delayed = stops.delay(60_000);
    process.emit("SIGUSR2", "SIGUSR2");
    await delayed;
    expect(vi.getTimerCount()).toBe(0);
  });
});
