import { readlinkSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import type { ConfigError } from "../lib/settings/index.ts";

/**
 * What `snooze serve` says when its settings file is not there, or undefined for any other failure
 * to read it. Node's words alone (`ENOENT: no such file or directory, stat 'snooze.yaml'`) named
 * neither the directory looked in nor what to do: `npx snooze serve` run outside the checkout is the
 * common case, and the default file is then looked for where it runs (found by a probe).
 */
export function missingConfigText(
  error: ConfigError,
  given: boolean,
  cwd = process.cwd(),
): string | undefined {
  if ((error.cause as NodeJS.ErrnoException | undefined)?.code !== "ENOENT") return undefined;
  if (!given)
    return `no settings file: there is no ${error.file} in ${cwd}, where snooze serve looks for one when --config does not name it; pass --config <file> (-c), or run it in the directory that holds ${error.file}`;
  const from = isAbsolute(error.file)
    ? ""
    : ` (a relative path is read from ${cwd}, the directory snooze serve runs in)`;
  return `the settings file is not valid:\n${error.file}: (top level): cannot read the file: ${
    danglingLinkText(error.file, cwd) ?? "there is no such file"
  }${from}`;
}

/**
 * A symbolic link whose target is gone (a config kept in a mounted volume or a dotfiles checkout
 * that moved) is "not there" to open(2) too; saying "no such file" of a file `ls` lists sent the
 * user looking in the wrong place (found by an outside tester).
 */
function danglingLinkText(file: string, cwd: string): string | undefined {
  try {
    const target = readlinkSync(resolve(cwd, file));
    return `it is a symbolic link (to ${target}) that leads to no file`;
  } catch {
    return undefined;
  }
}
