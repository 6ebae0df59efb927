import { describe, expect, test } from "vitest";
import { forgetSeries } from "./forget-series.ts";
import { Counter, Gauge, Histogram, Registry } from "./prometheus.ts";

const seriesOf = async (registry: Registry) =>
  (await registry.metrics()).split("\n").filter((line) => line && !line.startsWith("#"));

describe("forgetSeries", () => {
  test("removes every series carrying the labels, whatever the others say, and keeps the rest", async () => {
    const registry = new Registry();
    const counter = new Counter({
      name: "c",
      help: "c",
      labelNames: ["model", "code"],
      registers: [registry],
    });
    const gauge = new Gauge({ name: "g", help: "g", labelNames: ["model"], registers: [registry] });
    const histogram = new Histogram({
      name: "h",
      help: "h",
      labelNames: ["slot", "from", "to"],
      buckets: [1],
      registers: [registry],
    });
    for (const model of ["a", "b"]) {
      counter.inc({ model, code: "200" });
      counter.inc({ model, code: "503" });
      gauge.set({ model }, 1);
    }
    histogram.observe({ slot: "s", from: "a", to: "b" }, 1);
    histogram.observe({ slot: "s", from: "b", to: "a" }, 1);
    histogram.observe({ slot: "t", from: "b", to: "c" }, 1);

    forgetSeries(counter, { model: "a" });
    forgetSeries(gauge, { model: "a" });
    forgetSeries(histogram, { slot: "s", to: "a" });

    const left = await seriesOf(registry);
    expect(left.filter((line) => line.includes('model="a"'))).toEqual([]);
    expect(left.filter((line) => line.startsWith("c{"))).toHaveLength(2);
    expect(left.filter((line) => line.startsWith("g{"))).toEqual(['g{model="b"} 1']);
    expect(left.some((line) => line.includes('from="b",to="a"'))).toBe(false);
    expect(left.some((line) => line.includes('slot="s",from="a",to="b"'))).toBe(true);
    expect(left.some((line) => line.includes('slot="t"'))).toBe(true);
  });
});
