import { type ParseArgsOptionDescriptor, parseArgs } from "node:util";
import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";

/** A `snooze <name>` command (its summary is in cli/commands.ts). `run` resolves to the process exit code. */
export interface Command {
  name: string;
  flags: Record<string, Flag>;
  /** Positional arguments this command accepts, for the usage line; none when absent. */
  positionals?: string;
  /** `tokens` are the arguments in the order written (vLLM's `--served-model-name a b` needs it). */
  run(values: FlagValues, positionals: string[], tokens: readonly ArgToken[]): Promise<number>;
  /**
   * Rewrites the arguments before they are parsed, for a command that takes another program's
   * command line (`snooze sim` takes `vllm serve`'s); may throw a UsageError.
   */
  rewriteArgs?(argv: readonly string[]): string[];
}

/** One argument as parsed, in the order written. */
export type ArgToken = NonNullable<ReturnType<typeof parseArgs>["tokens"]>[number];

export function parseCommandArgs(command: Command, argv: string[]) {
  const options: Record<string, ParseArgsOptionDescriptor> = { help: { type: "boolean", short: "h" } };
  for (const [name, flag] of Object.entries(command.flags)) {
    const { description: _d, placeholder: _p, hidden: _h, ...descriptor } = flag;
    options[name] = descriptor;
  }
  let args: string[] = [];
  try {
    args = shortFlagsWithEquals(command, command.rewriteArgs ? command.rewriteArgs(argv) : argv);
    const parsed = parseArgs({
      args,
      options,
      strict: true,
      allowPositionals: command.positionals !== undefined,
      tokens: true,
    });
    return parsed;
  } catch (error) {
    // One of the command's own (`rewriteArgs`: the simulator's vLLM words), kept as it is.
    if (error instanceof UsageError) throw error;
    const unknown = /^Unknown option '(--?[^']+)'/.exec((error as Error).message);
    if (unknown) throw new UnknownFlag((error as Error).message, unknown[1]!);
    throw new UsageError(withoutValue(command, args, (error as Error).message) ?? (error as Error).message);
  }
}

/**
 * A flag written without its value, said in one line naming the flag, where Node's parser says
 * "Option '-p, --port <value>' argument missing", or, when a flag follows it, three lines calling
 * it "ambiguous" with a made-up `--port=-XYZ` (found by a docs walk). Undefined for other errors.
 */
function withoutValue(command: Command, args: readonly string[], message: string): string | undefined {
  const missing = /^Option '(?:-[^-], )?--([^ ']+) <[^>]*>' argument missing/.exec(message);
  const ambiguous = /^Option '(--?[^']+)' argument is ambiguous/.exec(message);
  const written = missing ? `--${missing[1]}` : ambiguous?.[1];
  if (written === undefined) return undefined;
  const name = written.startsWith("--")
    ? written.slice(2)
    : Object.entries(command.flags).find(([, flag]) => `-${flag.short}` === written)?.[0];
  if (name === undefined) return undefined;
  const flag = `--${name}`;
  if (missing) return `${flag} needs a value: ${flag} <${command.flags[name]?.placeholder ?? "value"}>`;
  const next = args[args.indexOf(written) + 1];
  return `${flag} needs a value, and what follows it, ${next}, is a flag (a value that begins with - is written ${flag}=<value>)`;
}

/**
 * `-n=5` as `--lines=5`: Node's parser reads what follows a short flag as its value, `=` included
 * (`-c=snooze.yaml` was the file "=snooze.yaml"), and a boolean's `-f=1` as the flags `-f`, `-=`
 * and `-1` ("Unknown option '-='"); a long flag's `=` and argparse's `-n=5` (vLLM's) are separators
 * (found by a probe). A boolean given a value so is a usage error; after `--`, nothing changes.
 */
function shortFlagsWithEquals(command: Command, argv: readonly string[]): string[] {
  const end = argv.indexOf("--");
  return argv.map((arg, i) => {
    const written = /^-([^-=])=(.*)$/s.exec(arg);
    if (!written || (end >= 0 && i > end)) return arg;
    const [, short, value] = written as unknown as [string, string, string];
    const flags = { help: { type: "boolean", short: "h" }, ...command.flags };
    const [long, flag] = Object.entries(flags).find(([, f]) => f.short === short) ?? [];
    if (long === undefined) return arg;
    if (flag?.type === "boolean")
      throw new UsageError(`-${short} (--${long}) takes no value: write -${short} alone`);
    return `--${long}=${value}`;
  });
}

/**
 * A flag the command does not have (`--portt`): main answers it with the one meant, if one is near,
 * else with the flags the command takes, after `lead`, the words that name it.
 */
export class UnknownFlag extends UsageError {
  readonly flag: string;
  readonly lead: string;
  /** With no flag near: said by its own message, not with the list of the command's flags. */
  readonly saidAlone: boolean;
  /** Flags, besides those `--help` lists, that one near it may be (vLLM's, for the simulator). */
  readonly alsoKnown: readonly string[];
  constructor(
    message: string,
    flag: string,
    lead = `Unknown option '${flag}'`,
    { saidAlone = false, alsoKnown = [] as readonly string[] } = {},
  ) {
    super(message);
    this.flag = flag;
    this.lead = lead;
    this.saidAlone = saidAlone;
    this.alsoKnown = alsoKnown;
  }
}

/** The flags `--help` lists for `command` (not the hidden ones), with their specs. */
export function shownFlags(command: Command): [string, Flag][] {
  return Object.entries(command.flags).filter(([, flag]) => !flag.hidden);
}

export function commandHelp(command: Command, summary: string): string {
  const lines = [
    `Usage: snooze ${command.name} [flags]${command.positionals ? ` ${command.positionals}` : ""}`,
    "",
    summary,
    "",
    "Flags:",
  ];
  const shown = shownFlags(command);
  const rows = shown.map(([name, flag]) => {
    const value = flag.type === "string" ? ` <${flag.placeholder ?? "value"}>` : "";
    const short = flag.short ? `-${flag.short}, ` : "    ";
    const def =
      flag.default !== undefined && flag.type === "string" ? ` (default ${String(flag.default)})` : "";
    return [`  ${short}--${name}${value}`, `${flag.description}${def}`] as const;
  });
  rows.push(["  -h, --help", "show this help"]);
  const width = Math.max(...rows.map(([left]) => left.length)) + 2;
  for (const [left, right] of rows) lines.push(left.padEnd(width) + right);
  return lines.join("\n");
}
