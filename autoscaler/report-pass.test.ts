import { describe, expect, test } from "vitest";
import { type ReportPassInput, reportNeedsPass } from "./report-pass.ts";

const idle = { inFlight: 0, held: 0 };
const base: ReportPassInput = {
  before: idle,
  ...idle,
  windowed: false,
  atRest: true,
  timerCoversTime: true,
  decidedIdle: true,
};

describe("reportNeedsPass", () => {
  test("an idle report repeating an idle one, at rest, with the timer covering time: no pass", () => {
    expect(reportNeedsPass(base)).toBe(false);
  });

  test("requests in flight or done, nothing held, after a pass that saw an idle load: no pass", () => {
    expect(reportNeedsPass({ ...base, inFlight: 1 })).toBe(false);
    expect(reportNeedsPass({ ...base, before: { inFlight: 1, held: 0 } })).toBe(false);
    expect(reportNeedsPass({ ...base, before: { inFlight: 3, held: 0 }, inFlight: 7 })).toBe(false);
  });

  test("the same after a pass that saw requests in flight: it armed no idle clock, so a pass", () => {
    for (const change of [{ inFlight: 1 }, { before: { inFlight: 1, held: 0 } }])
      expect(reportNeedsPass({ ...base, ...change, decidedIdle: false }), JSON.stringify(change)).toBe(true);
    // An idle report repeating an idle one needs none whatever the last pass saw.
    expect(reportNeedsPass({ ...base, decidedIdle: false })).toBe(false);
  });

  test("every other case passes as before", () => {
    const cases: Partial<ReportPassInput>[] = [
      { before: undefined },
      { held: 1 },
      { inFlight: 1, held: 1 },
      { before: { inFlight: 0, held: 2 } },
      { before: { inFlight: 2, held: 1 }, inFlight: 2 },
      { windowed: true },
      { before: { ...idle, reports: [] } },
      { atRest: false },
      { timerCoversTime: false },
    ];
    for (const change of cases)
      expect(reportNeedsPass({ ...base, ...change }), JSON.stringify(change)).toBe(true);
  });
});
