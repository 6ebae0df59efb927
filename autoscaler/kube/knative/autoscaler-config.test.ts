import { describe, expect, test } from "vitest";
import { autoscalerDefaults, knativeDefaults } from "./autoscaler-config.ts";

describe("Knative's config-autoscaler defaults", () => {
  test("absent keys (or no ConfigMap) are Knative's defaults", () => {
    expect(autoscalerDefaults(undefined)).toEqual({ defaults: knativeDefaults });
    expect(autoscalerDefaults({ "stable-window": "60s", _example: "..." })).toEqual({
      defaults: { minScale: 0, maxScale: 0, initialScale: 1, allowZeroInitialScale: false },
    });
  });

  test("min-scale, max-scale, initial-scale, allow-zero-initial-scale are read", () => {
    expect(
      autoscalerDefaults({
        "min-scale": "1",
        "max-scale": "3",
        "max-scale-limit": "5",
        "initial-scale": "0",
        "allow-zero-initial-scale": "true",
      }),
    ).toEqual({ defaults: { minScale: 1, maxScale: 3, initialScale: 0, allowZeroInitialScale: true } });
  });

  test("what Knative refuses is a problem (the last valid defaults are kept by the caller)", () => {
    expect(autoscalerDefaults({ "min-scale": "one" }).problem).toMatch(/min-scale/);
    expect(autoscalerDefaults({ "min-scale": "-1" }).problem).toMatch(/min-scale = -1/);
    expect(autoscalerDefaults({ "initial-scale": "0" }).problem).toMatch(/allow-zero-initial-scale/);
    expect(autoscalerDefaults({ "allow-zero-initial-scale": "yes" }).problem).toMatch(/boolean/);
    expect(autoscalerDefaults({ "min-scale": "4", "max-scale": "3" }).problem).toMatch(/more than/);
    expect(autoscalerDefaults({ "max-scale-limit": "5" }).problem).toMatch(/max-scale = 0/);
    expect(autoscalerDefaults({ "max-scale-limit": "5", "max-scale": "6" }).problem).toMatch(/max-scale = 6/);
    expect(autoscalerDefaults({ "max-scale": "99999999999" }).problem).toMatch(/max-scale/);
  });
});
