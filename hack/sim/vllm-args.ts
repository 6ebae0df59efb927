/**
 * Reads a `snooze sim` command line the way `vllm serve` reads it, so that a model's command can
 * swap one for the other: the simulator's own flags pass on to its parser; a vLLM flag that has no
 * effect here is taken with its value(s) as argparse would take them (so a value is never read as
 * the positional model) and passed on as one `--vllm-flag-ignored=<flag and value>` for the start-up
 * log; a flag neither has is refused as vLLM refuses it (`unrecognized arguments`, exit code 2), and
 * so is a value vLLM's argparse refuses for the flags users pass most (vllm-flag-values.ts).
 *
 * As vLLM's FlexibleArgumentParser, `_` in a flag's name is `-` (`--max_model_len`), and `-O3` is
 * `-O 3`. A JSON flag's keys may be given one by one (`--compilation-config.level 3`).
 */
import { UnknownFlag } from "../../cli/command.ts";
import { type Flag, UsageError } from "../../lib/cli-flags.ts";
import { checkVllmValue } from "./vllm-flag-values.ts";
import { type VllmFlagKind, vllmFlags, vllmShortFlags } from "./vllm-flags.ts";

/** The hidden `snooze sim` flag that carries each ignored vLLM flag to the start-up log. */
export const ignoredFlag = "vllm-flag-ignored";

/** A flag that neither vLLM nor the simulator has, named in vLLM's (argparse's) words. */
export class UnrecognizedFlag extends UnknownFlag {
  constructor(flag: string) {
    super(
      `unrecognized arguments: ${flag} (a flag neither vLLM nor the simulator has)`,
      flag,
      `unrecognized arguments: ${flag}`,
      // vLLM's flags and the simulator's are too many to list; a misspelt one of vLLM's is named.
      { saidAlone: true, alsoKnown: vllmNames },
    );
  }
}

/** vLLM's flag names, an on-off flag's `no-` form too (a misspelt `--no-x` is not `--x`). */
const vllmNames = [...vllmFlags].flatMap(([name, kind]) =>
  kind === "on-off" ? [name, `no-${name}`] : [name],
);

/** The arguments for the simulator's parser; a UsageError for what vLLM would refuse. */
export function simArgsFromVllm(argv: readonly string[], simFlags: Readonly<Record<string, Flag>>): string[] {
  const out: string[] = [];
  let i = 0;
  /** The words argparse gives a flag of this kind after it (inline: the value after `=`). */
  const take = (flag: string, kind: VllmFlagKind, inline: string | undefined): string[] => {
    if (typeof kind === "object") throw new UsageError(`${flag} is not simulated: ${kind.unsupported}`);
    if (kind === "on-off" || kind === "switch") {
      if (inline !== undefined)
        throw new UsageError(`argument ${flag}: ignored explicit argument '${inline}'`);
      return [];
    }
    if (inline !== undefined) return [inline];
    const words: string[] = [];
    while (i < argv.length && !looksLikeFlag(argv[i]!) && (kind === "values" || words.length === 0))
      words.push(argv[i++]!);
    if (words.length === 0 && kind !== "optional-value")
      throw new UsageError(
        `argument ${flag}: expected ${kind === "values" ? "at least one argument" : "one argument"}`,
      );
    return words;
  };
  const ignore = (written: string, words: string[]) =>
    out.push(`--${ignoredFlag}=${[written, ...words].join(" ")}`);

  while (i < argv.length) {
    const arg = argv[i++]!;
    if (arg === "--") {
      out.push(arg, ...argv.slice(i));
      break;
    }
    if (!looksLikeFlag(arg)) {
      out.push(arg);
      continue;
    }
    const equals = arg.indexOf("=");
    const written = equals < 0 ? arg : arg.slice(0, equals);
    const inline = equals < 0 ? undefined : arg.slice(equals + 1);
    if (!written.startsWith("--")) {
      // A short flag: the simulator's -h, or one of vLLM's (all take a value), `-O3` included.
      const short = written.slice(1);
      if (short === "h") {
        out.push(arg);
        continue;
      }
      const long = vllmShortFlags.get(short) ?? (short.startsWith("O") ? "compilation-config" : undefined);
      if (long === undefined) throw new UnrecognizedFlag(written);
      const attached = short.length > 1 && long === "compilation-config" ? short.slice(1) : undefined;
      const words = take(written, "value", attached ?? inline);
      checkVllmValue(long, words[0]!);
      ignore(attached === undefined ? written : "-O", words);
      continue;
    }
    const raw = written.slice(2);
    const name = whole(raw.includes(".") ? raw : raw.replaceAll("_", "-"), written, simFlags);
    // vLLM's `--help=all`, `--help=<group or keyword>` (argparse_utils.py): the whole help here,
    // where Node's parser refused a value for it.
    if (name === "help") {
      out.push("--help");
      continue;
    }
    const own = simFlags[name];
    if (own) {
      out.push(`--${name}${inline === undefined ? "" : `=${inline}`}`);
      // None, or a flag where it goes (`--port --enable-sleep-mode`), is refused as argparse
      // refuses it, not in Node's parser's words (found by a docs walk).
      if (own.type === "string" && inline === undefined && (i >= argv.length || looksLikeFlag(argv[i]!)))
        throw new UsageError(
          `argument --${name}: expected ${own.multiple ? "at least one argument" : "one argument"}`,
        );
      // A value written after the flag stays with it. A negative number (`--max-model-len -1`,
      // vLLM's auto) is one to argparse, and joined to its flag, as the simulator's parser would
      // take it for a flag.
      if (own.type === "string" && inline === undefined && i < argv.length) {
        const value = argv[i++]!;
        if (negativeNumber.test(value) && !own.multiple) out[out.length - 1] = `--${name}=${value}`;
        else out.push(value);
      }
      continue;
    }
    const negated = name.startsWith("no-") ? name.slice(3) : undefined;
    if (
      negated !== undefined &&
      vllmFlags.get(negated) === "on-off" &&
      simFlags[negated]?.type === "boolean"
    ) {
      take(written, "on-off", inline);
      // vLLM keeps the last of `--x` and `--no-x`: this one turns the simulator's flag back off.
      for (let at = out.indexOf(`--${negated}`); at >= 0; at = out.indexOf(`--${negated}`)) out.splice(at, 1);
      continue;
    }
    const kind = kindOf(name) ?? unrecognized(written);
    const words = take(written, kind, inline);
    if (kind === "value") checkVllmValue(name, words[0]!);
    ignore(written, words);
  }
  return out;
}

/**
 * The flag `name` begins, when it is no flag itself: argparse (`allow_abbrev`, which vLLM's parser
 * keeps) takes a flag's unique beginning for it (`--enable-sleep`), and refuses one that several
 * flags begin with. Anything else comes back as it is.
 */
function whole(name: string, written: string, simFlags: Readonly<Record<string, Flag>>): string {
  if (name.includes(".") || name === "help" || simFlags[name] || kindOf(name) !== undefined) return name;
  const names = new Set(["help", ...Object.keys(simFlags).filter((n) => !simFlags[n]!.hidden), ...vllmNames]);
  const matches = [...names].filter((known) => known.startsWith(name));
  if (matches.length > 1)
    throw new UsageError(
      `ambiguous option: ${written} could match ${matches.map((match) => `--${match}`).join(", ")}`,
    );
  return matches[0] ?? name;
}

/** How vLLM reads a flag (`--no-x` for an on-off `--x`, `--x.key` for a JSON `--x`), if it has it. */
function kindOf(name: string): VllmFlagKind | undefined {
  const kind = vllmFlags.get(name);
  if (kind !== undefined) return kind;
  if (name.startsWith("no-") && vllmFlags.get(name.slice(3)) === "on-off") return "on-off";
  const dot = name.indexOf(".");
  if (dot > 0 && vllmFlags.get(name.slice(0, dot)) === "value") return "value";
  return undefined;
}

function unrecognized(flag: string): never {
  throw new UnrecognizedFlag(flag);
}

/** A negative number, as argparse tells one from a flag. */
const negativeNumber = /^-\d+$|^-\d*\.\d+$/;

/** As argparse tells a flag from a value: a dash first, unless it is a negative number. */
function looksLikeFlag(arg: string): boolean {
  return arg.startsWith("-") && arg !== "-" && !negativeNumber.test(arg);
}
