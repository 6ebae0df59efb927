import { describe, expect, test } from "vitest";
import { autoscalerDefaults, knativeDefaults } from "./autoscaler-config.ts";

describe("Knative's config-autoscaler defaults", () => {
  test("absent keys (or no ConfigMap) are Knative's defaults", () => {
    expect(autoscalerDefaults(undefined)).toEqual({ defaults: knativeDefaults });
    expect(autoscalerDefaults({ _example: "..." })).toEqual({
      defaults: { minScale: 0, maxScale: 0, initialScale: 1, allowZeroInitialScale: false },
    });
  });

  test("stable-window and scale-to-zero-pod-retention-period are read when the ConfigMap sets them", () => {
    expect(
      autoscalerDefaults({ "stable-window": "1m30s", "scale-to-zero-pod-retention-period": "1h" }).defaults,
    ).toMatchObject({ stableWindow: "1m30s", retention: "1h" });
    expect(autoscalerDefaults({ "scale-to-zero-pod-retention-period": "0s" }).defaults?.retention).toBe("0s");
    // Not set: no default of Knative's own (60 s, 0 s) replaces Snooze's.
    const none = autoscalerDefaults({ "min-scale": "1" }).defaults!;
    expect(none.stableWindow).toBeUndefined();
    expect(none.retention).toBeUndefined();
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
    // As Knative's autoscalerconfig validates them, in its words (Go's durations: its webhook
    // denies "stable-window = 2s, must be in [6s; 1h0m0s] range").
    expect(autoscalerDefaults({ "stable-window": "5s" }).problem).toBe(
      "stable-window = 5s, must be in [6s; 1h0m0s] range",
    );
    expect(autoscalerDefaults({ "stable-window": "2h" }).problem).toMatch(/\[6s; 1h0m0s\] range/);
    expect(autoscalerDefaults({ "stable-window": "6500ms" }).problem).toMatch(/at most second precision/);
    expect(autoscalerDefaults({ "stable-window": "a minute" }).problem).toMatch(/not a duration/);
    expect(autoscalerDefaults({ "scale-to-zero-pod-retention-period": "-1s" }).problem).toBe(
      "scale-to-zero-pod-retention-period cannot be negative, was: -1s",
    );
  });
});
