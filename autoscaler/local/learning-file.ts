import { renameSync } from "node:fs";
import { join } from "node:path";
import type { LearningSnapshot } from "../../lib/learning-snapshot.ts";
import type { Logger } from "../../lib/log.ts";
import { makeDirectory } from "../../lib/make-directory.ts";
import { replaceFile } from "../../lib/replace-file.ts";
import { readSmallFileSync } from "../../lib/small-file.ts";
import type { LearningStore } from "../learning-store.ts";

/** The file in the state directory that keeps what each model learned. */
export const learningFileName = "learning.json";

/**
 * The largest learning history read: a model's record is at most some 45 KiB (a busy week's 2016
 * bins), so this holds well over a thousand busy models.
 */
const maxLearningFileBytes = 64 * 1024 * 1024;

interface LearningFile {
  version: 1;
  models: Record<string, unknown>;
}

/**
 * Local mode's learning store: `<state dir>/learning.json`, read once at start and written (to a
 * temporary file, then renamed) every few minutes and at shutdown. A missing file starts every
 * model with no history; a file that does not parse does too, is set aside as
 * `learning.json.corrupt`, and the log says why. Each model's record is checked when the model
 * takes it up (a bad one is refused alone).
 */
export function learningFile(stateDir: string, log: Logger): LearningStore {
  const path = join(stateDir, learningFileName);
  // A Map, not the parsed object: a model named `constructor` or `toString` would find the
  // object's inherited function there (found by an outside tester: "learning history not usable
  // … received function"), and one named `__proto__` set its prototype.
  const models = new Map(Object.entries(read(path, log)));
  return {
    source: path,
    load: (key) => models.get(key),
    save(snapshots: ReadonlyMap<string, LearningSnapshot>) {
      for (const [key, snapshot] of snapshots) models.set(key, snapshot);
      // `fromEntries` defines each key as its own (`__proto__` too), and JSON.stringify writes them all.
      const file: LearningFile = { version: 1, models: Object.fromEntries(models) };
      makeDirectory(stateDir);
      // Named by pid: each Snooze writes its own temporary.
      replaceFile(path, `${path}.${process.pid}.tmp`, `${JSON.stringify(file)}\n`);
    },
  };
}

function read(path: string, log: Logger): Record<string, unknown> {
  let text: string;
  try {
    // Bounded and never blocking: a named pipe in its place hung `snooze serve` at start for good,
    // silent and deaf to SIGTERM (found by an outside tester).
    text = readSmallFileSync(path, maxLearningFileBytes).toString("utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") log.info("no learning history yet; every model starts with none", { file: path });
    else
      log.warn("cannot read the learning history; every model starts with none", {
        file: path,
        error: (error as Error).message,
      });
    return {};
  }
  const why = problem(text);
  if (why === undefined) return (JSON.parse(text) as LearningFile).models;
  log.warn("the learning history is corrupt; every model starts with none", { file: path, reason: why });
  try {
    renameSync(path, `${path}.corrupt`);
  } catch {}
  return {};
}

function problem(text: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return `not JSON: ${(error as Error).message}`;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return "not a JSON object";
  const file = parsed as Partial<LearningFile>;
  if (file.version !== 1) return `unknown version ${JSON.stringify(file.version)} (expected 1)`;
  if (typeof file.models !== "object" || file.models === null || Array.isArray(file.models))
    return "`models` is not an object";
  return undefined;
}
