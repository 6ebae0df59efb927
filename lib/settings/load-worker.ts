/**
 * The worker thread `loadConfigFileOffLoop` parses large settings files in: it answers each file's
 * bytes with its settings, or the problems that make it invalid (a ConfigError's own, which the
 * main thread builds the same error from: a class instance does not cross the thread boundary).
 */
import { answerOffLoop } from "../off-loop-worker.ts";
import { ConfigError } from "./config-error.ts";
import { parseConfigBytes } from "./load.ts";
import type { ConfigAnswer, ConfigQuestion } from "./load-off-loop.ts";

answerOffLoop(({ bytes, path, options }: ConfigQuestion): ConfigAnswer => {
  try {
    return { config: parseConfigBytes(bytes, path, options) };
  } catch (error) {
    if (error instanceof ConfigError) return { problems: error.problems };
    return { failed: String((error as Error)?.stack ?? error) };
  }
});
