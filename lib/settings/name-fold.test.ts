import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";
import { problemsOf } from "./testing.ts";

describe("names that look alike", () => {
  const nfc = "caf\u00e9";
  const nfd = "cafe\u0301";

  test("ids and aliases of different models equal in Unicode NFKC are refused, spelled out", () => {
    // Found by an outside tester: `café` in NFC and in NFD loaded as two identical-looking models.
    expect(
      problemsOf(
        `models:\n  ${nfc}:\n    command: [x, '\${PORT}']\n  ${nfd}:\n    command: [x, '\${PORT}']\n`,
      ),
    ).toEqual([
      {
        key: `models.${nfd}`,
        line: 4,
        column: 3,
        message:
          '"cafe\\u{301}" and "caf\\u{E9}" (model "caf\\u{E9}") differ only in Unicode form (they are one name in NFKC, with case ignored); ids and aliases must differ in more, or they look like one name: write both the same way (one model) or rename one',
      },
    ]);
    // Compatibility forms too (full-width letters), and with case: an alias of another model.
    expect(
      problemsOf(
        "models:\n  qwen:\n    command: [x, '${PORT}']\n  llama:\n    command: [x, '${PORT}']\n    aliases: [\uff31wen]\n",
      ),
    ).toEqual([
      expect.objectContaining({
        key: "models.llama.aliases.0",
        message: expect.stringMatching(
          /^"\\u\{FF31\}wen" and "qwen" \(model "qwen"\) differ only in Unicode form/,
        ),
      }),
    ]);
  });

  test("one model may take both forms, as it may take both cases: they reach the same model", () => {
    const config = parseConfig(`models:\n  ${nfc}:\n    command: [x, '\${PORT}']\n    aliases: [${nfd}]\n`);
    expect(config.names.get(nfd)).toBe(nfc);
  });
  test("slot names that differ only in case or Unicode form are refused; a slot named so is said to be near", () => {
    // Found by an outside tester: `slot: café` (NFC) beside a slot `café` (NFD) was refused as
    // 'slot "café" is not defined under `slots:` (defined: café)'; two slots `gpu0` and `GPU0`
    // loaded as two accelerators, so their members could be resident at once on one GPU.
    const model = (id: string, slot: string) => `  ${id}:\n    command: [x, '\${PORT}']\n    slot: ${slot}\n`;
    expect(
      problemsOf(`slots:\n  ${nfd}: {}\n  gpu0: {}\nmodels:\n${model("a", nfc)}${model("b", "GPU0")}`),
    ).toEqual([
      {
        key: "models.a.slot",
        line: 7,
        column: 5,
        message:
          'slot "caf\\u{E9}" is not defined under `slots:`, but "cafe\\u{301}" is, which differs from it only in Unicode form (they look alike): write the name as the slot is written',
      },
      {
        key: "models.b.slot",
        line: 10,
        column: 5,
        message:
          'slot "GPU0" is not defined under `slots:`, but "gpu0" is, which differs from it only in case: write the name as the slot is written',
      },
    ]);
    expect(
      problemsOf(`slots:\n  gpu0: {}\n  GPU0: {}\nmodels:\n${model("a", "gpu0")}${model("b", "GPU0")}`),
    ).toEqual([
      {
        key: "slots.GPU0",
        line: 3,
        column: 3,
        message:
          'slots "GPU0" and "gpu0" differ only in case: slots are accelerators apart, and names this close would be taken for one; write one name (one slot) or rename one',
      },
    ]);
    expect(
      problemsOf(`slots:\n  ${nfc}: {}\n  ${nfd}: {}\nmodels:\n${model("a", nfc)}${model("b", nfd)}`),
    ).toEqual([
      expect.objectContaining({
        key: `slots.${nfd}`,
        message:
          'slots "cafe\\u{301}" and "caf\\u{E9}" differ only in Unicode form (they are one name in NFKC, with case ignored): slots are accelerators apart, and names this close would be taken for one; write one name (one slot) or rename one',
      }),
    ]);
  });
});
