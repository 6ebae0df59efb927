import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { modelSpec } from "../lib/kube/model-resource.ts";
import { slotSpec } from "../lib/kube/slot-resource.ts";
import { settingsFromAnnotations } from "../lib/settings/annotations.ts";

// The examples in config/samples/ are read by Snooze's own schemas here; the e2e suite checks that
// a real apiserver accepts them (server-side dry-run).
const docs = (file: string) =>
  parseAllDocuments(readFileSync(resolve(import.meta.dirname, "../config/samples", file), "utf8")).map(
    (doc) =>
      doc.toJS() as { kind: string; metadata: { annotations?: Record<string, string> }; spec: unknown },
  );

describe("config/samples", () => {
  test("the Model in front of the vLLM Deployment is valid and names that Deployment", () => {
    const [deployment, model] = docs("vllm-model.yaml");
    expect(deployment?.kind).toBe("Deployment");
    expect(model?.kind).toBe("Model");
    const spec = modelSpec.parse(model?.spec);
    expect(spec.workloadRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: "qwen" });
    expect(spec.sleepAfter).toBe(600_000);
  });

  test("the Slot is valid", () => {
    const [slot] = docs("slot.yaml");
    expect(slotSpec.parse(slot?.spec).policy).toBe("priority");
  });

  test("the Knative Service's snooze.dev annotations are valid tier settings", () => {
    const [service] = docs("knative-service.yaml");
    const { settings, problems } = settingsFromAnnotations(service?.metadata.annotations);
    expect(problems).toEqual([]);
    expect(settings).toMatchObject({
      sleepAfter: 300_000,
      sleepLevel: 2,
      aliases: ["llama-3.2-1b", "llama-small"],
    });
  });
});
