import { describe, expect, test } from "vitest";
import type { KIngress } from "../../../lib/knative/ingress-class.ts";
import { type SplitModel, splitModels } from "./split-models.ts";

const ingress = (revisions: string[]): KIngress => ({
  metadata: { name: "qwen", namespace: "team-a" },
  spec: {
    rules: ["ExternalIP", "ClusterLocal"].map((visibility) => ({
      hosts: [`qwen.${visibility}`],
      visibility: visibility as "ExternalIP",
      http: {
        paths: [
          {
            splits: revisions.map((r) => ({
              serviceNamespace: "team-a",
              serviceName: r,
              percent: 100 / revisions.length,
            })),
          },
        ],
      },
    })),
  },
});
const models =
  (keys: string[]) =>
  (key: string): SplitModel | undefined =>
    keys.includes(key) ? { metadata: { name: key.split("/")[1]! } } : undefined;

describe("the Models of a KIngress's splits", () => {
  test("every revision with a Model: nothing in the way (each revision counted once)", () => {
    expect(
      splitModels(ingress(["q-00001", "q-00002"]), models(["team-a/q-00001", "team-a/q-00002"])),
    ).toEqual({
      withoutModel: [],
    });
  });

  test("a revision without a Model is named", () => {
    expect(splitModels(ingress(["q-00001", "q-00002"]), models(["team-a/q-00001"])).withoutModel).toEqual([
      "team-a/q-00002",
    ]);
  });
});
