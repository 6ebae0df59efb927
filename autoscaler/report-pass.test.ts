import { describe, expect, test } from "vitest";
import { type ReportPassInput, reportNeedsPass } from "./report-pass.ts";

const idle = { inFlight: 0, held: 0 };
const base: ReportPassInput = { before: idle, ...idle, windowed: false, atRest: true, timerCoversTime: true };

describe("reportNeedsPass", () => {
  test("an idle report repeating an idle one, at rest, with the timer covering time: no pass", () => {
    expect(reportNeedsPass(base)).toBe(false);
  });

  test("every other case passes as before", () => {
    const cases: Partial<ReportPassInput>[] = [
      { before: undefined },
      { inFlight: 1 },
      { held: 1 },
      { before: { inFlight: 1, held: 0 } },
      { before: { inFlight: 0, held: 2 } },
      { windowed: true },
      { before: { ...idle, reports: [] } },
      { atRest: false },
      { timerCoversTime: false },
    ];
    for (const change of cases)
      expect(reportNeedsPass({ ...base, ...change }), JSON.stringify(change)).toBe(true);
  });
});
