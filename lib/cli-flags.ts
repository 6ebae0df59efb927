import type { ParseArgsOptionDescriptor } from "node:util";

/**
 * One flag of a command: its parseArgs descriptor plus the text `--help` shows. A `hidden` flag is
 * set by the command's own argument reading (`Command.rewriteArgs`), not by users: `--help` leaves it out.
 */
export type Flag = ParseArgsOptionDescriptor & {
  description: string;
  placeholder?: string;
  hidden?: boolean;
};

export type FlagValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** A mistake in how the command was called: printed with usage, exit code 2. */
export class UsageError extends Error {}

/**
 * A failure the command says in one line (a port in use): printed as `snooze <command>: message`
 * with no stack trace, exit code 1.
 */
export class CommandFailure extends Error {}
