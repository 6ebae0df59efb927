/**
 * What JSON leaves raw though it breaks a line for its readers, or acts on a terminal (found by an
 * outside tester: an engine's last words with a U+2028 made its `activation failed` warning two
 * lines, neither JSON, to Node's readline, and so each document of `snooze status --json --watch`).
 * U+2028 and U+2029 end a line for Node's readline, U+0085 for Python's `splitlines`; the other C1
 * controls are controls to a terminal (U+009B begins an escape sequence as ESC [ does, which JSON
 * does escape); the bidirectional marks reorder what a person reads.
 */
const lineBreakers = /[\u0080-\u009f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const escaped = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;

/**
 * JSON `text` (as `JSON.stringify` writes it) with those characters as `\u` escapes. They can only
 * stand in a string, where the escape means the same character: the text parses as before.
 */
export function escapeLineBreakers(text: string): string {
  return text.replace(lineBreakers, escaped);
}
