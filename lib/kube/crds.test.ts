import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, test } from "vitest";
import { edgeModelSpec, invalidModels, validModelSpec } from "../../test/fixtures/models.ts";
import { tierSettings } from "../settings/model.ts";
import { slotSettings } from "../settings/slot.ts";
import { crdFiles, modelCrd, slotCrd } from "./crds.ts";
import { slotLeaseName } from "./lease.ts";
import { modelSpec, modelStatus } from "./model-resource.ts";
import { type JSONSchema, re2Pattern } from "./structural-schema.ts";

const crdDir = resolve(import.meta.dirname, "../../config/crd");

const versionSchema = (crd: JSONSchema) =>
  (crd as { spec: { versions: { schema: { openAPIV3Schema: JSONSchema } }[] } }).spec.versions[0]!.schema
    .openAPIV3Schema as { properties: Record<string, { properties: Record<string, JSONSchema> }> };

describe("CRDs", () => {
  test("the committed config/crd files are exactly what hack/gen-crds.ts generates", () => {
    for (const [name, text] of Object.entries(crdFiles())) {
      expect(
        readFileSync(resolve(crdDir, name), "utf8"),
        `config/crd/${name} is stale: run hack/gen-crds.ts`,
      ).toBe(text);
    }
  });

  test("a Model's spec carries every tier setting of snooze.yaml under the same name", () => {
    const spec = versionSchema(modelCrd()).properties.spec!.properties;
    for (const key of Object.keys(tierSettings.shape)) expect(spec, key).toHaveProperty(key);
    for (const key of ["workloadRef", "model", "port", "replicas", "minReplicas", "maxReplicas"]) {
      expect(spec, key).toHaveProperty(key);
    }
  });

  test("a Slot's spec carries every slot setting of snooze.yaml under the same name", () => {
    const spec = versionSchema(slotCrd()).properties.spec!.properties;
    expect(Object.keys(spec).sort()).toEqual(Object.keys(slotSettings.shape).sort());
  });

  test("a Slot's device is one GPU, and the CRD's pattern and the zod schema agree on it", () => {
    const device = versionSchema(slotCrd()).properties.spec!.properties.device as {
      pattern: string;
      maxLength: number;
    };
    const crdAccepts = (value: string) =>
      value.length <= device.maxLength && new RegExp(device.pattern).test(value);
    const zodAccepts = (value: string) => slotSettings.safeParse({ device: value }).success;
    const uuid = "3f1c2e8a-1b2c-4d5e-8f9a-0b1c2d3e4f5a";
    const accepted = ["0", "7", "GPU-fef8089b", `GPU-${uuid}`, `MIG-${uuid}`, `MIG-GPU-${uuid}/1/0`, "0:1"];
    const refused = [
      "all",
      "none",
      "void",
      "",
      "0,1",
      "0\n1",
      "GPU-\u200b1",
      " 0",
      "gpu-0",
      "GPU-",
      "MIG-x",
      "1".repeat(200),
    ];
    for (const value of accepted)
      expect([value, crdAccepts(value), zodAccepts(value)]).toEqual([value, true, true]);
    for (const value of refused)
      expect([value, crdAccepts(value), zodAccepts(value)]).toEqual([value, false, false]);
  });

  test("a Model's slot is named as a Slot object can be; the CRD's pattern and the zod schema agree", () => {
    const slot = versionSchema(modelCrd()).properties.spec!.properties.slot as {
      pattern: string;
      maxLength: number;
    };
    const crdAccepts = (value: string) =>
      value.length >= 1 && value.length <= slot.maxLength && new RegExp(slot.pattern).test(value);
    const zodAccepts = (value: string) => modelSpec.safeParse({ ...validModelSpec, slot: value }).success;
    const accepted = ["gpu-0", "a", "0", "gpu.node-1", "g".repeat(241)];
    const refused = [
      "",
      "Not A Label!",
      "gpu-0 ",
      " gpu-0",
      "GPU-0",
      "gpu_0",
      "-gpu",
      "gpu-",
      "gpu..0",
      "g".repeat(242),
      "gpu\u200b0",
    ];
    for (const value of accepted)
      expect([value, crdAccepts(value), zodAccepts(value)]).toEqual([value, true, true]);
    for (const value of refused)
      expect([value, crdAccepts(value), zodAccepts(value)]).toEqual([value, false, false]);
    // Its Lease keeps the whole name, so two slots never share one.
    expect(slotLeaseName("g".repeat(241))).toBe(`snooze-slot-${"g".repeat(241)}`);
  });

  test("every field has a description, so `kubectl explain` documents it", () => {
    const undocumented: string[] = [];
    const walk = (node: JSONSchema, path: string, top = false) => {
      for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, JSONSchema>)) {
        if (top && name === "metadata") continue; // ObjectMeta: Kubernetes documents it
        if (!child.description) undocumented.push(`${path}.${name}`);
        walk(child, `${path}.${name}`);
      }
      if (node.items) walk(node.items as JSONSchema, `${path}[]`);
    };
    walk(versionSchema(modelCrd()) as JSONSchema, "model", true);
    walk(versionSchema(slotCrd()) as JSONSchema, "slot", true);
    expect(undocumented).toEqual([]);
  });

  test("the scale subresource points at replicas and selector that exist in the schema", () => {
    const version = (
      modelCrd() as { spec: { versions: { subresources: { scale: Record<string, string> } }[] } }
    ).spec.versions[0]!;
    const schema = versionSchema(modelCrd());
    expect(version.subresources.scale).toEqual({
      specReplicasPath: ".spec.replicas",
      statusReplicasPath: ".status.replicas",
      labelSelectorPath: ".status.selector",
    });
    expect(schema.properties.spec!.properties.replicas).toMatchObject({ type: "integer" });
    expect(schema.properties.status!.properties.replicas).toMatchObject({ type: "integer" });
    expect(schema.properties.status!.properties.selector).toMatchObject({ type: "string" });
  });

  test("sleepLevel is an integer, 1 or 2, in the CRD as in zod (an outside tester read it as strings)", () => {
    // The API server's refusal quotes every allowed value (`Unsupported value: 3: supported values:
    // "1", "2"`), integers too; the schema itself says integer, so kubectl explain shows <integer>
    // and a string "1" is refused as "must be of type integer".
    const sleepLevel = versionSchema(modelCrd()).properties.spec!.properties.sleepLevel;
    expect(sleepLevel).toEqual({ description: expect.any(String), type: "integer", enum: [1, 2] });
    expect(readFileSync(resolve(crdDir, "snooze.dev_models.yaml"), "utf8")).toMatch(
      /\n( +)sleepLevel:\n\1 {2}description: [^\n]*\n\1 {2}type: integer\n\1 {2}enum:\n\1 {4}- 1\n\1 {4}- 2\n/,
    );
    const zodAccepts = (value: unknown) =>
      modelSpec.safeParse({ ...validModelSpec, sleepLevel: value }).success;
    expect([1, 2, "1", 3, 0, 1.5].map(zodAccepts)).toEqual([true, true, false, false, false, false]);
  });

  test("the zod schema accepts the valid example and fills the same defaults as the CRD", () => {
    const parsed = modelSpec.parse(validModelSpec);
    expect(parsed).toMatchObject({ port: 8000, minReplicas: 0, maxReplicas: 2, sleepAfter: 300_000 });
    const spec = versionSchema(modelCrd()).properties.spec!.properties;
    expect(spec.port?.default).toBe(8000);
    expect(spec.minReplicas?.default).toBe(0);
    expect(spec.maxReplicas?.default).toBe(1);
  });

  test.each(invalidModels)("the zod schema refuses what the CRD refuses: $name", ({ spec }) => {
    expect(modelSpec.safeParse(spec).success).toBe(false);
  });

  test("the zod schema accepts the values at the edge of each range the CRD's rules check", () => {
    expect(modelSpec.safeParse(edgeModelSpec).error?.issues).toBeUndefined();
  });

  test("patterns are read by the API server (RE2) as zod (JavaScript) reads them: \\s is Unicode whitespace", () => {
    const pattern = versionSchema(modelCrd()).properties.spec!.properties.model?.pattern as string;
    expect(pattern).not.toContain("\\s");
    expect(pattern).toContain("\\x{00a0}");
    expect(re2Pattern("^a\\sb[^\\s]$")).toBe(
      "^a[\\t\\n\\v\\f\\r \\x{00a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]b[^\\t\\n\\v\\f\\r \\x{00a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]$",
    );
    expect(re2Pattern("^\\d+\\.\\\\s$")).toBe("^\\d+\\.\\\\s$");
  });

  test("a status in its written form parses", () => {
    const status = {
      replicas: 1,
      readyReplicas: 1,
      warmingReplicas: 0,
      sleepingReplicas: 1,
      selector: "app=qwen",
      phase: "Ready",
      replicaTiers: [{ pod: "qwen-1", tier: "asleep-1", since: "2026-01-01T00:00:00Z" }],
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" }],
      lastWakeDuration: "2.4s",
    };
    expect(modelStatus.parse(status).lastWakeDuration).toBe(2_400);
  });
});
