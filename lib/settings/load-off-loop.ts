import { OffLoopTimeout, OffLoopWorker } from "../off-loop-worker.ts";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import { type LoadOptions, parseConfigBytes, readConfigBytes } from "./load.ts";
import type { SnoozeConfig } from "./resolve.ts";

/**
 * From this size on a settings file is parsed on a worker thread. The YAML library is slow on a
 * large file: 640 KiB (9,000 top-level `x-` entries) took 1 to 2.4 s, a file near the 1 MiB limit
 * 2 to 3 s, and a reload held the event loop all that time: no request was proxied and every
 * stream stalled (found by an outside tester). Measured on a busy 2-core machine: a real file of
 * 2 KiB holds the loop 4 to 5 ms, 9 KiB 20 to 40 ms, 16 KiB some 30 ms; through a worker the loop
 * is held 6 to 11 ms whatever the size (starting it), but the answer comes 0.5 to 1 s later and
 * the process grows by 15 to 35 MiB meanwhile (the worker loads the settings' modules anew). So a
 * file below this, a stall no longer than a garbage collection's, is parsed on the loop, as before.
 * (These figures were measured once by hand with a throwaway script, not kept; the stall itself is
 * held by test/local/config-reload.test.ts, which times `/healthz` during a large file's reload.)
 */
export const offLoopConfigBytes = 16 * 1024;

/**
 * How long a worker may take over one file before the reload gives up: ten times what the largest
 * file takes on a slow machine. It should never be reached; if it is, the reload is refused with
 * a clear problem rather than left waiting forever (reloads run one at a time).
 */
export const configParseTimeoutMs = 30_000;

export interface ConfigQuestion {
  bytes: Uint8Array;
  path: string;
  options: LoadOptions;
}

/**
 * The settings (plain data, Maps and Infinity: a structured clone keeps them whole), the problems
 * of an invalid file, or what went wrong otherwise (a bug: thrown as an Error on the main thread).
 */
export type ConfigAnswer = { config: SnoozeConfig } | { problems: ConfigProblem[] } | { failed: string };

/** Not kept once a file is parsed: reloads are rare, and an idle worker holds a heap of its own. */
const parser = new OffLoopWorker<ConfigQuestion, ConfigAnswer>(new URL("./load-worker.ts", import.meta.url), {
  keep: false,
});

/**
 * `loadConfigFile` for a process that serves meanwhile (a reload): a file of `offLoopConfigBytes`
 * or more is parsed on a worker thread, so the event loop goes on proxying. The settings and the
 * ConfigError (its problems, `file:line:col: key: reason`) are those `loadConfigFile` gives; a
 * worker that gives no answer within `timeoutMs` is ended and the file refused, saying so.
 */
export async function loadConfigFileOffLoop(
  path: string,
  options: LoadOptions = {},
  { timeoutMs = configParseTimeoutMs }: { timeoutMs?: number } = {},
): Promise<SnoozeConfig> {
  const bytes = await readConfigBytes(path);
  if (bytes.length < offLoopConfigBytes) return parseConfigBytes(bytes, path, options);
  let answer: ConfigAnswer | undefined;
  try {
    answer = await parser.ask({ bytes, path, options }, { timeoutMs });
  } catch (error) {
    if (!(error instanceof OffLoopTimeout)) throw error;
    throw new ConfigError(path, [
      {
        key: "",
        message: `reading the settings took longer than ${timeoutMs / 1000} s, and was given up; the file is ${bytes.length} bytes`,
      },
    ]);
  }
  // A worker that failed, or could not start: parsed here, as at start-up.
  if (!answer) return parseConfigBytes(bytes, path, options);
  if ("failed" in answer) throw new Error(`parsing the settings failed: ${answer.failed}`);
  if ("problems" in answer) throw new ConfigError(path, answer.problems);
  return answer.config;
}
