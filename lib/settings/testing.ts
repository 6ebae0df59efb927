import { ConfigError, type ConfigProblem } from "./config-error.ts";
import { parseConfig } from "./load.ts";

/** For tests: the problems `parseConfig` finds in `text` (as `bad.yaml`); throws when it finds none. */
export function problemsOf(text: string): ConfigProblem[] {
  try {
    parseConfig(text, "bad.yaml");
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error("expected a ConfigError");
}

/** For tests: a file with one model, `qwen`, with these settings (one a line) after those in `extra`. */
export const withModel = (settings: string, extra = "") =>
  `${extra}models:\n  qwen:\n    command: [x, '\${PORT}']\n${settings
    .split("\n")
    .filter(Boolean)
    .map((line) => `    ${line}\n`)
    .join("")}`;
