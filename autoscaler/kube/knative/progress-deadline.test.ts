import { describe, expect, test } from "vitest";
import { progressDeadlineOf } from "./progress-deadline.ts";

describe("progressDeadlineOf", () => {
  test("a revision's Deployment's progressDeadlineSeconds, in ms: where Knative writes the annotation's or config-deployment's", () => {
    // Knative v0.50 (MakeDeployment): `serving.knative.dev/progress-deadline: 5s` gives 5.
    expect(progressDeadlineOf({ spec: { progressDeadlineSeconds: 5 } })).toBe(5_000);
    expect(progressDeadlineOf({ spec: { progressDeadlineSeconds: 600 } })).toBe(600_000);
  });

  test("none, or one that is no deadline, is undefined: the pod is then kept until startTimeout", () => {
    for (const spec of [undefined, {}, { progressDeadlineSeconds: 0 }, { progressDeadlineSeconds: -1 }])
      expect(progressDeadlineOf({ spec }), JSON.stringify(spec)).toBeUndefined();
    expect(progressDeadlineOf({ spec: { progressDeadlineSeconds: "600" } })).toBeUndefined();
    expect(progressDeadlineOf({ spec: { progressDeadlineSeconds: 1.5 } })).toBeUndefined();
  });
});
