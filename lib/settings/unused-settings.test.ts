import { describe, expect, test } from "vitest";
import { parseConfig } from "./load.ts";

const model = (settings: string) => `models:\n  qwen:\n    command: [x, "\${PORT}"]\n${settings}`;

describe("settings that never take effect (warnings; the file stays valid)", () => {
  test("sleep-only settings on a model whose sleep is off, each at its line", () => {
    const config = parseConfig(model("    sleep: false\n    sleepLevel: 2\n    zeroAfter: 1h\n"), "s.yaml");
    expect(config.warnings).toEqual([
      "s.yaml:5:5: models.qwen.sleepLevel: never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
      "s.yaml:6:5: models.qwen.zeroAfter: never applies: `sleep` is false, so a replica goes from ready to cold at `sleepAfter` and never sleeps",
    ]);
  });

  test("a deeper sleep that never comes: zeroAfter first, or level 2 at once", () => {
    expect(parseConfig(model("    zeroAfter: 1h\n    deepSleepAfter: 3h\n"), "s.yaml").warnings).toEqual([
      "s.yaml:5:5: models.qwen.deepSleepAfter: never comes: the engine stops after 1h asleep (`zeroAfter`), before 3h asleep would take it to level 2 (`deepSleepAfter`)",
    ]);
    expect(parseConfig(model("    sleepLevel: 2\n    deepSleepAfter: 3h\n")).warnings?.[0]).toMatch(
      /models\.qwen\.deepSleepAfter: never applies: `sleepLevel` is 2/,
    );
  });

  test("none for the defaults' settings alone, for `never`, or for a ladder that works", () => {
    const fromDefaults = `defaults:\n  deepSleepAfter: 3h\n  zeroAfter: 1h\n  sleepLevel: 2\n${model("    sleep: false\n")}`;
    expect(parseConfig(fromDefaults).warnings).toBeUndefined();
    expect(parseConfig(model("    zeroAfter: never\n    deepSleepAfter: 3h\n")).warnings).toBeUndefined();
    expect(parseConfig(model("    zeroAfter: 4h\n    deepSleepAfter: 1h\n")).warnings).toBeUndefined();
  });
});
