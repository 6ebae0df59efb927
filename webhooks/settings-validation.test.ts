import { describe, expect, test } from "vitest";
import { validateModel, validateSlot, validateWorkloadAnnotations } from "./settings-validation.ts";
import { validateSlotModelReplicas } from "./slot-replicas.ts";

const ref = { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" };
const model = (spec: Record<string, unknown>) => ({ metadata: { name: "qwen" }, spec });

describe("validateModel: the one schema, with path, value and allowed form", () => {
  test.each([
    { name: "valid", spec: { workloadRef: ref, sleepAfter: "5m", slot: "gpu-0" }, message: undefined },
    {
      name: "bad duration",
      spec: { workloadRef: ref, sleepAfter: "5 minutes" },
      message:
        'Model "qwen" is not valid: spec.sleepAfter: "5 minutes": expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"',
    },
    {
      name: "sleep level outside the literals",
      spec: { workloadRef: ref, sleepLevel: 3 },
      message: 'Model "qwen" is not valid: spec.sleepLevel: 3: expected 1 or 2',
    },
    {
      name: "port too big",
      spec: { workloadRef: ref, port: 70_000 },
      message: 'Model "qwen" is not valid: spec.port: 70000: expected an integer from 1 to 65535',
    },
    {
      name: "missing workloadRef",
      spec: {},
      message: 'Model "qwen" is not valid: spec.workloadRef: is required',
    },
    {
      name: "wrong type",
      spec: { workloadRef: ref, warmup: "yes" },
      message: 'Model "qwen" is not valid: spec.warmup: "yes": expected true or false',
    },
    {
      name: "unknown field",
      spec: { workloadRef: ref, sleepAftr: "5m" },
      message: expect.stringMatching(
        /^Model "qwen" is not valid: spec.sleepAftr: unknown field; allowed: aliases, sleep, /,
      ),
    },
    {
      name: "an alias repeated (the CRD's list is a set, too)",
      spec: { workloadRef: ref, aliases: ["q", "qwen-7b", "q"] },
      message:
        'Model "qwen" is not valid: spec.aliases.2: "q": is listed twice; ids and aliases must be unique',
    },
    {
      name: "a slot no Slot object could be named",
      spec: { workloadRef: ref, slot: "Not A Label!" },
      message:
        'Model "qwen" is not valid: spec.slot: "Not A Label!": a slot is named as its Slot object is: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, at most 241 characters',
    },
    {
      name: "min above max",
      spec: { workloadRef: ref, minReplicas: 3, maxReplicas: 2 },
      message:
        'Model "qwen" is not valid: spec.minReplicas: 3: minReplicas must not be greater than maxReplicas',
    },
  ])("$name", ({ spec, message }) => {
    const verdict = validateModel(model(spec));
    if (message === undefined) expect(verdict).toEqual({ allowed: true });
    else expect(verdict).toMatchObject({ allowed: false, code: 422, reason: "Invalid", message });
  });

  test("several problems are all listed, separated by semicolons", () => {
    const verdict = validateModel(model({ workloadRef: ref, sleepAfter: "x", holdBudget: "y" }));
    expect(verdict.message?.split("; ")).toHaveLength(2);
  });
});

test("a Model with 5,000 unknown fields: the allowed ones said once, 20 listed", () => {
  const spec = {
    workloadRef: ref,
    ...Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`f${i}`, 1])),
  };
  const message = validateModel(model(spec)).message ?? "";
  expect(message.length).toBeLessThan(4_000);
  expect(message.match(/allowed: /g)).toHaveLength(1);
  expect(message).toMatch(/spec\.f19: unknown field; and 4,980 more$/);
});

test("a field holding a value nested 10,000 deep is named with the start of its value", () => {
  // Showing the value serialized all of it, recursively: the stack overflowed and the Model was
  // refused with "retry" rather than with the field (found by an outside tester).
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < 10_000; i++) deep = { a: deep };
  expect(validateModel(model({ workloadRef: ref, sleepAfter: deep })).message).toBe(
    `Model "qwen" is not valid: spec.sleepAfter: ${'{"a":'.repeat(15)}{"...: expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"`,
  );
  expect(validateSlot({ metadata: { name: "gpu-0" }, spec: { policy: [deep] } }).message).toMatch(
    /^Slot "gpu-0" is not valid: spec\.policy: \[\{"a":\{"a":.*\.\.\.: expected "sticky", "fifo" or "priority"$/,
  );
});

describe("validateSlot", () => {
  test.each([
    { spec: undefined, message: undefined },
    { spec: { policy: "fifo", device: "0" }, message: undefined },
    {
      spec: { policy: "lifo" },
      message: 'Slot "gpu-0" is not valid: spec.policy: "lifo": expected "sticky", "fifo" or "priority"',
    },
    {
      spec: { minResidency: "soon" },
      message:
        'Slot "gpu-0" is not valid: spec.minResidency: "soon": expected a duration like "250ms", "30s", "5m", "1h30m" or "0"',
    },
    {
      spec: { device: 0 },
      message: expect.stringContaining('spec.device: 0: expected one GPU: an index ("0")'),
    },
    {
      spec: { device: "all" },
      message:
        'Slot "gpu-0" is not valid: spec.device: "all": expected one GPU: an index ("0"), a GPU UUID ("GPU-" then hex digits and dashes, as `nvidia-smi -L` shows it) or a MIG device ("MIG-" then its UUID, "MIG-GPU-<uuid>/<gi>/<ci>", or "<gpu>:<mig>" such as "0:1"); not a list, "all", "none" or "void"',
    },
    {
      spec: { device: "GPU-\u200b1" },
      message: expect.stringContaining('spec.device: "GPU-\u200b1": expected one GPU'),
    },
    { spec: { device: "" }, message: expect.stringContaining('spec.device: "": expected one GPU') },
    { spec: { device: "MIG-GPU-3f1c2e8a-1b2c-4d5e-8f9a-0b1c2d3e4f5a/1/0" }, message: undefined },
  ])("$spec", ({ spec, message }) => {
    const verdict = validateSlot({ metadata: { name: "gpu-0" }, ...(spec ? { spec } : {}) });
    if (message === undefined) expect(verdict.allowed).toBe(true);
    else expect(verdict).toMatchObject({ allowed: false, message });
  });
});

describe("validateWorkloadAnnotations", () => {
  const deployment = (annotations: Record<string, string>) => ({ metadata: { name: "qwen", annotations } });
  test.each<{ annotations: Record<string, string>; message: unknown }>([
    {
      annotations: { "snooze.dev/sleep-after": "30s", "snooze.dev/slot": "gpu-0", "other.io/x": "y" },
      message: undefined,
    },
    { annotations: { "snooze.dev/tier": "ready", "snooze.dev/model": "qwen" }, message: undefined },
    {
      annotations: { "snooze.dev/sleep-after": "soon" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/sleep-after"]: "soon": expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"',
    },
    {
      annotations: { "snooze.dev/sleep-level": "3" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/sleep-level"]: "3": expected 1 or 2',
    },
    {
      annotations: { "snooze.dev/warmup": "maybe" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/warmup"]: "maybe": expected true or false',
    },
    {
      annotations: { "snooze.dev/aliases": "q, q" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/aliases"]: "q, q": entry 2 ("q"): is listed twice; ids and aliases must be unique',
    },
    // Found by an outside tester: each entry's problem was said without the entry, ",,," four
    // times over, and "a,B c," did not say which one holds whitespace.
    {
      annotations: { "snooze.dev/aliases": ",,," },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/aliases"]: ",,,": entries 1, 2, 3 and 4: may not be empty',
    },
    {
      annotations: { "snooze.dev/aliases": "a,B c," },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/aliases"]: "a,B c,": entry 2 ("B c"): a model id may not contain whitespace; metadata.annotations["snooze.dev/aliases"]: "a,B c,": entry 3: may not be empty',
    },
    {
      // Found by an outside tester: 100,000 of them held the webhooks' event loop for 16 s.
      annotations: { "snooze.dev/aliases": Array.from({ length: 100_000 }, (_, i) => `a${i}`).join(",") },
      message: expect.stringMatching(
        /^Deployment "qwen" has invalid snooze\.dev annotations: metadata\.annotations\["snooze\.dev\/aliases"\]: .*may list at most 100 aliases/,
      ),
    },
    // Found by an outside tester: the autoscaler copies it into the Model's spec.model, which the
    // CRD refuses, so no Model was ever made and nobody was told.
    {
      annotations: { "snooze.dev/model": "x y" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/model"]: "x y": a model id may not contain whitespace',
    },
    {
      annotations: { "snooze.dev/model": "qw\u200ben" },
      message: expect.stringContaining(
        'metadata.annotations["snooze.dev/model"]: "qw\u200ben": "qw\\u{200B}en" holds U+200B (zero width space) at position 3',
      ),
    },
    {
      annotations: { "snooze.dev/model": "q".repeat(300) },
      message: expect.stringContaining("must be at most 253 characters long"),
    },
    { annotations: { "snooze.dev/model": " qwen " }, message: undefined },
    // Found by an outside tester: slot names no Slot object can have were taken, and several shared
    // one Lease; an empty one got zod's own words.
    {
      annotations: { "snooze.dev/slot": "" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/slot"]: "": may not be empty: name the Slot the members share (lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, at most 241 characters), or leave the setting out for no slot',
    },
    {
      annotations: { "snooze.dev/slot": "GPU-0" },
      message:
        'Deployment "qwen" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/slot"]: "GPU-0": a slot is named as its Slot object is: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, at most 241 characters',
    },
    {
      annotations: { "snooze.dev/slot": "gpu-0 " },
      message: expect.stringContaining(
        '["snooze.dev/slot"]: "gpu-0 ": a slot is named as its Slot object is',
      ),
    },
    {
      annotations: { "snooze.dev/slot": "g".repeat(5_000) },
      message: expect.stringContaining(": is too long: a slot is named as its Slot object is"),
    },
    {
      annotations: { "snooze.dev/slep-after": "5m" },
      message: expect.stringMatching(
        /metadata\.annotations\["snooze\.dev\/slep-after"\]: "5m": unknown setting; did you mean snooze\.dev\/sleep-after\?; known: snooze\.dev\/aliases, /,
      ),
    },
  ])("$annotations", ({ annotations, message }) => {
    const verdict = validateWorkloadAnnotations("Deployment", deployment(annotations));
    if (message === undefined) expect(verdict).toEqual({ allowed: true });
    else expect(verdict).toMatchObject({ allowed: false, code: 422, message });
  });

  test("8,000 unknown keys: the known ones said once, 20 problems listed and the rest counted", () => {
    // Found by an outside tester: the known list for each unknown key made a 5 MB denial.
    const annotations = Object.fromEntries(
      Array.from({ length: 8_000 }, (_, i) => [`snooze.dev/k${i}`, "x"]),
    );
    const message = validateWorkloadAnnotations("Deployment", deployment(annotations)).message ?? "";
    expect(message.length).toBeLessThan(4_000);
    expect(message.match(/known: /g)).toHaveLength(1);
    expect(message).toMatch(
      /\["snooze\.dev\/k19"\]: "x": unknown setting \(the known ones are listed with the first\); and 7,980 more$/,
    );
  });

  test("a Knative Service's revision template annotations are checked too", () => {
    const service = {
      metadata: { name: "qwen" },
      spec: { template: { metadata: { annotations: { "snooze.dev/concurrency": "-1" } } } },
    };
    expect(validateWorkloadAnnotations("Service", service).message).toContain(
      'spec.template.metadata.annotations["snooze.dev/concurrency"]: "-1"',
    );
    // For a Deployment the template is the pods', stamped by Snooze itself: not settings.
    expect(validateWorkloadAnnotations("Deployment", service).allowed).toBe(true);
  });
});

describe("validateSlotModelReplicas: a Model in a slot asks for at most one replica", () => {
  test.each([
    { spec: { slot: "gpu-0", replicas: 1, maxReplicas: 1 }, denied: undefined },
    { spec: { replicas: 3, maxReplicas: 3 }, denied: undefined },
    {
      spec: { slot: "gpu-0", maxReplicas: 2 },
      denied:
        'Model "qwen" is in slot "gpu-0" and may ask for at most one replica, but spec.maxReplicas is 2. A slot is one accelerator that runs one member at a time: set these to 1 or less, or remove spec.slot to scale the model on its own.',
    },
    {
      spec: { slot: "gpu-0", replicas: 2, minReplicas: 2, maxReplicas: 2 },
      denied: expect.stringContaining(
        "but spec.replicas is 2, spec.minReplicas is 2, spec.maxReplicas is 2.",
      ),
    },
  ])("$spec", ({ spec, denied }) => {
    const verdict = validateSlotModelReplicas(model(spec));
    if (denied === undefined) expect(verdict.allowed).toBe(true);
    else expect(verdict).toMatchObject({ allowed: false, code: 403, message: denied });
  });
});
