import { describe, expect, test } from "vitest";
import { knativeClassWarnings } from "./knative-class.ts";

const service = (own: Record<string, string>, template: Record<string, string>) => ({
  metadata: { name: "qwen", annotations: own },
  spec: { template: { metadata: { annotations: template } } },
});

describe("warnings for a Knative Service whose snooze.dev settings would do nothing", () => {
  test("the class on the revision template: no warning", () => {
    expect(
      knativeClassWarnings(
        "Service",
        "qwen",
        service({}, { "autoscaling.knative.dev/class": "snooze.dev", "snooze.dev/sleep-after": "1m" }),
      ),
    ).toEqual([]);
  });

  test("settings without the class: Knative scales it and Snooze leaves it alone, says which class", () => {
    expect(knativeClassWarnings("Service", "qwen", service({}, { "snooze.dev/sleep-after": "1m" }))).toEqual([
      'Service "qwen": snooze.dev settings need autoscaling.knative.dev/class: snooze.dev in spec.template.metadata.annotations (it is not set); without it Knative scales this Service and Snooze leaves it alone',
    ]);
    expect(
      knativeClassWarnings(
        "Service",
        "qwen",
        service(
          {},
          { "snooze.dev/sleep-after": "1m", "autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev" },
        ),
      )[0],
    ).toContain('(it is "kpa.autoscaling.knative.dev")');
  });

  test("settings on the Service itself do not reach its revisions", () => {
    const warnings = knativeClassWarnings(
      "Service",
      "qwen",
      service({ "snooze.dev/sleep-after": "1m" }, { "autoscaling.knative.dev/class": "snooze.dev" }),
    );
    expect(warnings).toEqual([
      'Service "qwen": snooze.dev settings in metadata.annotations do not reach its revisions; put them in spec.template.metadata.annotations',
    ]);
  });

  test("aliases on a Knative revision template are used (they reach the newest ready revision): no warning", () => {
    const warnings = knativeClassWarnings(
      "Service",
      "qwen",
      service({}, { "autoscaling.knative.dev/class": "snooze.dev", "snooze.dev/aliases": "chat" }),
    );
    expect(warnings).toEqual([]);
  });

  test("a Service without snooze.dev settings is Knative's and says nothing", () => {
    expect(
      knativeClassWarnings("Service", "qwen", service({}, { "autoscaling.knative.dev/min-scale": "1" })),
    ).toEqual([]);
  });
});
