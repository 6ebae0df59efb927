/**
 * The list a text given where a list of strings goes most likely meant, as YAML to write instead:
 * `command: "vllm serve m --port ${PORT}"` → `[vllm, serve, m, --port, "${PORT}"]`. Found by an
 * outside tester: such a command was refused as "expected a list of strings" without the list form
 * it meant, so the user guessed at YAML's quoting. The text is split into words as a shell would
 * split it (quotes and backslashes kept together); one that needs a shell's features (a pipe,
 * `&&`, a redirection, a `$VAR` of its own) is shown run by one, `[sh, -c, "…"]`: Snooze runs the
 * command itself, with no shell between.
 */
export function listFormOf(text: string): string {
  const words = needsShell(text) ? undefined : shellWords(text);
  return flowList(words ?? ["sh", "-c", text]);
}

/** Snooze's own placeholders, which it substitutes itself (lib/settings/placeholders.ts). */
const placeholder = /\$\{(?:PORT|HOST|MODEL|SNOOZE)\}/g;

/** What only a shell makes sense of. */
function needsShell(text: string): boolean {
  return /[|&;<>()`*?~]|\$/.test(text.replace(placeholder, "")) || /^\s*\w+=/.test(text);
}

/** `text`'s words as `sh` splits them, undefined when a quote is left open. */
function shellWords(text: string): string[] | undefined {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) return undefined;
      word = (word ?? "") + text.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      word ??= "";
      for (i++; i < text.length && text[i] !== '"'; i++) {
        if (text[i] === "\\" && /["\\$`]/.test(text[i + 1] ?? "")) i++;
        word += text[i]!;
      }
      if (i >= text.length) return undefined;
    } else if (c === "\\" && i + 1 < text.length) {
      word = (word ?? "") + text[++i]!;
    } else word = (word ?? "") + c;
  }
  if (word !== undefined) words.push(word);
  return words;
}

/** `words` as a YAML flow sequence, each a string to YAML 1.2: plain where safe, else double-quoted. */
function flowList(words: readonly string[]): string {
  return `[${words.map((word) => (plainSafe(word) ? word : JSON.stringify(word))).join(", ")}]`;
}

/** A word YAML reads back as this same string, unquoted inside `[...]`. */
function plainSafe(word: string): boolean {
  return (
    /^[A-Za-z0-9_./=+@-]+$/.test(word) &&
    !/^-?$|^- /.test(word) &&
    // Not read as a number, a boolean or null.
    !/^[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^0[xo][\da-fA-F]+$/.test(word) &&
    !/^(true|false|null|True|False|TRUE|FALSE|Null|NULL)$/.test(word)
  );
}
