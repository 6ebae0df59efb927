import { CommandFailure, UsageError } from "../lib/cli-flags.ts";
import { type Command, commandHelp, parseCommandArgs, shownFlags, UnknownFlag } from "./command.ts";
import { commands } from "./commands.ts";
import { outliveOutputFailures, watchOutputFailures } from "./output-failures.ts";

const version = "0.1.0";

/** Lists every command with its summary, loading none of them. */
function topHelp(): string {
  const width = Math.max(...commands.map((c) => c.name.length)) + 2;
  return [
    "Usage: snooze <command> [flags]",
    "",
    "Puts idle LLM model servers to sleep instead of to zero, and wakes them when a request arrives.",
    "",
    "Commands:",
    ...commands.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    "",
    "Run `snooze <command> --help` for a command's flags.",
  ].join("\n");
}

/**
 * The flag a misspelt one most likely meant (`--portt` → `--port`), as a misspelt command or
 * settings key is answered (found by an outside tester: `snooze serve --prot 1` named no flag).
 */
async function nearFlag(unknown: UnknownFlag, command: Command): Promise<string | undefined> {
  const { flag } = unknown;
  if (!flag.startsWith("--")) return undefined;
  const { closestKey } = await import("../lib/settings/suggest.ts");
  const written = flag.slice(2);
  const names = [...new Set([...shownFlagNames(command), ...unknown.alsoKnown])];
  // Else one with a word more or less, too far in letters (found by a probe): `--config-file` for
  // `--config`, `--token-file` for `--admin-token-file`; never a flag's opposite (`--no-wait`).
  const wordsApart = names.filter(
    (name) => written.startsWith(`${name}-`) || (name.endsWith(`-${written}`) && !name.startsWith("no-")),
  );
  const near = closestKey(written, names) ?? (wordsApart.length === 1 ? wordsApart[0] : undefined);
  return near === undefined ? undefined : `--${near}`;
}

/** The flags `--help` lists for `command`, by name, `help` included. */
function shownFlagNames(command: Command): string[] {
  return [...shownFlags(command).map(([name]) => name), "help"];
}

/**
 * An unknown flag near none: what the command takes instead. Node's own words for it, in a command
 * that takes a model, told the user to pass the flag as a model's name after `--`, with a quote left
 * open (`as in '-- "--json"`, found by an outside tester); that way stays said, for a name that
 * does begin with a dash.
 */
function unknownFlagText(unknown: UnknownFlag, command: Command): string {
  const flags = shownFlagNames(command)
    .map((name) => `--${name}`)
    .join(", ");
  const dash = command.positionals
    ? ` (a ${command.positionals.replace(/[<>]/g, "")} whose name begins with '-' goes after '--': snooze ${command.name} -- ${unknown.flag})`
    : "";
  return `${unknown.lead}; snooze ${command.name} takes ${flags}${dash}`;
}

/** Runs the CLI and resolves to the exit code: 0 ok, 1 runtime failure, 2 usage error. */
export async function main(argv: string[]): Promise<number> {
  // `snooze help status` is `snooze status --help`.
  if (argv[0] === "help" && argv.length > 1) return main([argv[1]!, "--help"]);
  const [name, ...rest] = argv;
  // A reader gone (`snooze logs -f | head -1`) ends a command's output, not in a stack trace; a full
  // disk is said; a server outlives both (see cli/output-failures.ts).
  watchOutputFailures(
    name !== undefined && commands.some((c) => c.name === name) ? `snooze ${name}` : "snooze",
  );
  if (name === "--help" || name === "-h" || name === "help") {
    console.log(topHelp());
    return 0;
  }
  if (name === undefined) {
    // A usage error: the help goes where errors go, so `snooze | …` does not take it for output.
    console.error(topHelp());
    return 2;
  }
  if (name === "--version" || name === "-v") {
    console.log(version);
    return 0;
  }
  const entry = commands.find((c) => c.name === name);
  if (!entry) {
    // As a misspelt settings key is answered (found by an outside tester: `snooze statsu` was not);
    // loaded only here, so `snooze --help` loads no more than it did.
    const names = commands.map((c) => c.name);
    // `snooze --port 9000 serve`: the flags belong after the command (found by a probe: the answer
    // said only that "--port" is no command).
    const later = rest.findIndex((word) => names.includes(word));
    if (name.startsWith("-") && later >= 0) {
      const moved = [rest[later]!, name, ...rest.filter((_, i) => i !== later)].join(" ");
      console.error(
        `snooze: "${name}" is not a command: flags go after the command they belong to (snooze ${moved})`,
      );
      console.error("Run `snooze --help` for usage.");
      return 2;
    }
    const { closestKey } = await import("../lib/settings/suggest.ts");
    // `snooze version`, `-help`: the flags that stand where a command does.
    const near = closestKey(name, [...names, "--help", "--version"]);
    console.error(
      `snooze: unknown command "${name}"${near ? `; did you mean "${near}"?` : "."} Commands: ${commands.map((c) => c.name).join(", ")}.`,
    );
    console.error("Run `snooze --help` for usage.");
    return 2;
  }
  // Loaded only here: `snooze --help` and the client commands import nothing they do not use.
  if (entry.server) {
    const signals = await import("./signals.ts");
    signals.holdEarlyStopSignals();
    if (entry.reloads) signals.holdEarlyHangUps();
  }
  const command: Command = await entry.load();
  try {
    const { values, positionals, tokens } = parseCommandArgs(command, rest);
    if (values.help) {
      console.log(commandHelp(command, entry.summary));
      return 0;
    }
    if (entry.untilStopped) outliveOutputFailures();
    const code = await command.run(values, positionals, tokens);
    // A server has shut down when `run` returns: a connection or timer still open then gets a
    // second, not the process's life; an exporter left waiting on a collector, nothing at all.
    if (entry.server) {
      const { spansLeftBehind } = await import("../lib/telemetry.ts");
      setTimeout(() => process.exit(code), spansLeftBehind() ? 0 : 1_000).unref();
    }
    return code;
  } catch (error) {
    if (error instanceof CommandFailure) {
      console.error(`snooze ${command.name}: ${error.message}`);
      // A server that failed while starting may hold what it opened so far (watches on the API
      // server, a listening port): they get a second, as after a shutdown.
      if (entry.server) setTimeout(() => process.exit(1), 1_000).unref();
      return 1;
    }
    if (error instanceof UsageError) {
      const unknown = error instanceof UnknownFlag ? error : undefined;
      const near = unknown === undefined ? undefined : await nearFlag(unknown, command);
      const said = !unknown
        ? error.message
        : near
          ? `${unknown.lead}; did you mean '${near}'?`
          : unknown.saidAlone
            ? error.message
            : unknownFlagText(unknown, command);
      console.error(`snooze ${command.name}: ${said}`);
      console.error(`Run \`snooze ${command.name} --help\` for usage.`);
      return 2;
    }
    throw error;
  }
}
