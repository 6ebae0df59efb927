/** One problem in a settings file, located so a person can fix it. */
export interface ConfigProblem {
  /** Dotted key path, e.g. `models.qwen.sleepAfter`. */
  key: string;
  message: string;
  line?: number;
  column?: number;
}

/** A settings file that cannot be used; `message` lists every problem as `file:line:col: key: reason`. */
export class ConfigError extends Error {
  readonly file: string;
  readonly problems: ConfigProblem[];

  constructor(file: string, problems: ConfigProblem[], options?: ErrorOptions) {
    const inFileOrder = inReadingOrder(problems);
    super(formatProblems(file, inFileOrder).join("\n"), options);
    this.name = "ConfigError";
    this.file = file;
    this.problems = inFileOrder;
  }
}

/** In the order of the file, as a person reads it (zod reports them in the schema's order). */
function inReadingOrder(problems: readonly ConfigProblem[]): ConfigProblem[] {
  return [...problems].sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
}

/** Each problem as a line `file:line:col: key: reason`, in the order of the file. */
export function formatProblems(file: string, problems: readonly ConfigProblem[]): string[] {
  return inReadingOrder(problems).map((p) => formatProblem(file, p));
}

function formatProblem(file: string, problem: ConfigProblem): string {
  const where = problem.line ? `${file}:${problem.line}:${problem.column ?? 1}` : file;
  return `${where}: ${problem.key || "(top level)"}: ${oneLine(problem.message)}`;
}

/**
 * A message on one line: it may quote a key or value from the file, and a YAML key can hold a line
 * break (`"models\n"`); written raw, one problem would span two lines and break the
 * `file:line:col:` form editors and scripts read. Line breaks are spelled out as escapes.
 */
function oneLine(message: string): string {
  return message.replace(/[\n\r\u2028\u2029]/g, (c) => lineBreakEscapes[c] ?? c);
}

const lineBreakEscapes: Record<string, string> = {
  "\n": "\\n",
  "\r": "\\r",
  "\u2028": "\\u{2028}",
  "\u2029": "\\u{2029}",
};

/**
 * A dotted key path; a name that is empty or holds a space, a dot or a character that does not show
 * is quoted (`models."my model"`), the last spelled out (`models."qwen\u{200B}"`).
 */
export const keyPath = (path: readonly PropertyKey[]) =>
  path
    .map((key) =>
      /^[^\s."\p{Cc}\p{Cf}]+$/u.test(String(key))
        ? String(key)
        : JSON.stringify(String(key)).replace(
            /\p{Cf}/gu,
            (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`,
          ),
    )
    .join(".");
