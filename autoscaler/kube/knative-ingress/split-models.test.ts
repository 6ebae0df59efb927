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
  (entries: Record<string, string | undefined>) =>
  (key: string): SplitModel | undefined => {
    const name = key.split("/")[1]!;
    if (!(key in entries)) return undefined;
    const id = entries[key];
    return { metadata: { name }, ...(id ? { spec: { model: id } } : {}) };
  };

describe("the Models of a KIngress's splits", () => {
  test("every revision with a Model of its own id: nothing in the way (each revision counted once)", () => {
    expect(
      splitModels(
        ingress(["q-00001", "q-00002"]),
        models({ "team-a/q-00001": undefined, "team-a/q-00002": "other" }),
      ),
    ).toEqual({ withoutModel: [], sharedIds: [] });
  });

  test("a revision without a Model is named", () => {
    expect(
      splitModels(ingress(["q-00001", "q-00002"]), models({ "team-a/q-00001": undefined })).withoutModel,
    ).toEqual(["team-a/q-00002"]);
  });

  test("two revisions whose Models serve one id (snooze.dev/model) are named with it", () => {
    expect(
      splitModels(
        ingress(["q-00001", "q-00002"]),
        models({ "team-a/q-00001": "qwen", "team-a/q-00002": "qwen" }),
      ).sharedIds,
    ).toEqual([{ id: "qwen", revisions: ["team-a/q-00001", "team-a/q-00002"] }]);
  });
});
