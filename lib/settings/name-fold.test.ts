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
});
