import { clip } from "./clip.ts";

/**
 * Text from elsewhere (a server's, to a client command; an engine's, in the messages, status and
 * events Snooze makes of it) made safe to print: control characters (an escape sequence that would recolour
 * or retitle the terminal, a carriage return that would overwrite the line), U+2028 and U+2029, and
 * the invisible marks that reorder text are shown as `\x1b`, `\u2028`, `\u202e`. Newlines and tabs are kept unless `oneLine`
 * (a name, a table cell), where they are shown as `\n` and `\t` too.
 */
export function printable(text: string, oneLine = false): string {
  let out = "";
  for (const char of text) {
    const code = char.codePointAt(0)!;
    const hidden =
      code < 0x20 ||
      (code >= 0x7f && code <= 0x9f) ||
      code === 0x200e ||
      // The line and paragraph separators: a line's end to some readers (Node's readline).
      code === 0x2028 ||
      code === 0x2029 ||
      code === 0x200f ||
      (code >= 0x202a && code <= 0x202e) ||
      (code >= 0x2066 && code <= 0x2069);
    if (!hidden || (!oneLine && (char === "\n" || char === "\t"))) out += char;
    else if (char === "\n") out += "\\n";
    else if (char === "\t") out += "\\t";
    else out += code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`;
  }
  return out;
}

/** A name the server gave (a model's id, a replica's), clipped and safe to print on one line. */
export const shown = (name: string, max = 200) => printable(clip(name, max), true);
