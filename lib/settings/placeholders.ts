/**
 * The placeholders of an engine's `command` and `env`: `${PORT}`, `${HOST}` and `${MODEL}` are
 * replaced by their values, `${SNOOZE}` (a command argument of its own) runs this Snooze, and
 * `$${` is a literal `${`. Any other `${…}` is refused rather than passed on: a typo (`${PROT}`)
 * would otherwise reach the engine as it is. `$NAME` without braces is left alone, for a shell.
 */

/** What a placeholder is replaced by. */
export interface PlaceholderValues {
  PORT: string;
  HOST: string;
  MODEL: string;
}

/** The one argument that runs this Snooze (`${SNOOZE} sim …`); only as an argument of its own. */
export const snoozeArgument = "${SNOOZE}";

/** `$${` (a literal `${`), `${NAME}`, or a `${` that is never closed (no name). */
const token = /\$\$\{|\$\{(?:([^}]*)\})?/g;

const substituted = new Set(["PORT", "HOST", "MODEL"]);

/** The placeholders `text` holds, by name, in order (undefined: a `${` never closed); `$${` is none. */
export function placeholdersIn(text: string): (string | undefined)[] {
  return [...text.matchAll(token)].filter(([match]) => match !== "$${").map(([, name]) => name);
}

/**
 * Why the placeholders in one command argument (`in: "command"`) or env value (`in: "env"`)
 * cannot work, or undefined when they can.
 */
export function placeholderProblem(text: string, where: { in: "command" | "env" }): string | undefined {
  const literal = 'write $${ for a literal ${ (as in "$${HOME}" for a shell)';
  for (const name of placeholdersIn(text)) {
    if (name !== undefined && substituted.has(name)) continue;
    if (name === "SNOOZE") {
      if (where.in === "command" && text === snoozeArgument) continue;
      return where.in === "command"
        ? "${SNOOZE} must be an argument of its own (it stands for the whole command that runs Snooze)"
        : "${SNOOZE} is taken only as a command argument of its own, not in env";
    }
    const known =
      where.in === "command" ? "${PORT}, ${HOST}, ${MODEL} and ${SNOOZE}" : "${PORT}, ${HOST} and ${MODEL}";
    const what = name === undefined ? "a ${ without its closing }" : `\${${name}}`;
    return `${what} is not a placeholder: the known ones are ${known}; ${literal}`;
  }
  return undefined;
}

/** `text` with each placeholder replaced by its value and each `$${` by `${` (check it first). */
export function substitutePlaceholders(text: string, values: PlaceholderValues): string {
  return text.replace(token, (match, name: string | undefined) =>
    match === "$${" ? "${" : substituted.has(name ?? "") ? values[name as keyof PlaceholderValues] : match,
  );
}
