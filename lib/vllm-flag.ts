/**
 * vLLM's flags that Snooze reads in an engine's command (local `command`, a pod's `command` and
 * `args`), read as vLLM's own parser reads them, in one place: underscores for dashes
 * (`--api_key`: vLLM's FlexibleArgumentParser turns them into dashes before it parses), a value
 * after `=` (`--api-key=k`) or as the next word, a flag shortened (`--api-k`: vLLM keeps argparse's
 * abbreviations), and the flag inside a `sh -c` script (a word with spaces, split at them). Found
 * by outside testers: the sleep-mode check knew these spellings and the warm-up's `--api-key` did
 * not, so an engine run with `--api_key k` was warmed without its key and answered 401.
 */

/** One of vLLM's long flags, without its dashes, and the shortest beginning of it taken for it. */
export interface VllmFlag {
  name: string;
  /**
   * Shortened no further than this: the shortest that names no other of vLLM's flags by its looks
   * (argparse refuses an ambiguous beginning; vLLM adds flags from one release to the next).
   */
  shortest: string;
  /** Takes every word up to the next flag (argparse's `nargs="+"`), not one. */
  list?: true;
}

export const enableSleepModeFlag: VllmFlag = { name: "enable-sleep-mode", shortest: "enable-sleep" };
export const apiKeyFlag: VllmFlag = { name: "api-key", shortest: "api-k" };
export const hfTokenFlag: VllmFlag = { name: "hf-token", shortest: "hf-t" };
export const servedModelNameFlag: VllmFlag = { name: "served-model-name", shortest: "served", list: true };
/** `--model` shortened is `--model-impl`'s beginning too: only whole. */
export const modelFlag: VllmFlag = { name: "model", shortest: "model" };
/** `--config` shortened is `--config-format`'s beginning too: only whole. */
export const configFlag: VllmFlag = { name: "config", shortest: "config" };
export const portFlag: VllmFlag = { name: "port", shortest: "port" };
export const hostFlag: VllmFlag = { name: "host", shortest: "host" };

/**
 * **Pure**: whether `word` is `flag` as vLLM reads it, and the value written after its `=` if any.
 * `--no-enable-sleep-mode`, a longer word (`--enable-sleep-modes`) or another flag are not it.
 */
export function readAs(word: string, flag: VllmFlag): { inline?: string } | undefined {
  if (!word.startsWith("--")) return undefined;
  const equals = word.indexOf("=");
  const written = (equals < 0 ? word.slice(2) : word.slice(2, equals)).replaceAll("_", "-");
  if (written.length < flag.shortest.length || !flag.name.startsWith(written)) return undefined;
  return equals < 0 ? {} : { inline: word.slice(equals + 1) };
}

/** A negative number, which argparse takes for a value, not a flag. */
const negativeNumber = /^-\d+$|^-\d*\.\d+$/;

/** As argparse tells a flag from a value. */
const looksLikeFlag = (word: string) => word.startsWith("-") && word !== "-" && !negativeNumber.test(word);

/** A word of a script that is the shell's to expand (`"$KEY"`): its value is not known here. */
const shellWord = /[$`'"\\]/;

/**
 * **Pure**: the values `flag` is given in `command`, one list per time it is written, in order
 * (vLLM keeps the last): the word after it, unless that is a flag, or what follows its `=`; every
 * word up to the next flag for a list flag. A flag with no value written gives an empty list.
 * Inside a script (a word with spaces), words the shell would expand are left out.
 */
export function vllmFlagValues(command: readonly string[], flag: VllmFlag): string[][] {
  const found: string[][] = [];
  const read = (words: readonly string[], inScript: boolean) => {
    for (const [index, word] of words.entries()) {
      if (!inScript && /\s/.test(word) && !readAs(words[index - 1] ?? "", flag)) {
        read(word.trim().split(/\s+/), true);
        continue;
      }
      const as = readAs(word, flag);
      if (!as) continue;
      const values: string[] = [];
      if (as.inline !== undefined) values.push(as.inline);
      else
        for (const next of words.slice(index + 1)) {
          if (looksLikeFlag(next)) break;
          values.push(next);
          if (!flag.list) break;
        }
      found.push(inScript ? values.filter((value) => !shellWord.test(value)) : values);
    }
  };
  read(command, false);
  return found;
}

/** **Pure**: whether `command` writes `flag` at all (see `vllmFlagValues`). */
export function hasVllmFlag(command: readonly string[], flag: VllmFlag): boolean {
  return vllmFlagValues(command, flag).length > 0;
}

/** **Pure**: the value `flag` has in `command`: the first word of its last writing, if any. */
export function vllmFlagValue(command: readonly string[], flag: VllmFlag): string | undefined {
  return vllmFlagValues(command, flag).at(-1)?.[0];
}

/** **Pure**: whether `word` turns vLLM's sleep mode on (one word of a command, or a script). */
export function enablesSleepMode(word: string): boolean {
  return hasVllmFlag([word], enableSleepModeFlag);
}
