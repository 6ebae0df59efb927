import { printable } from "./printable.ts";

/**
 * An engine's words (its last lines of output, an error answer's text) as Snooze puts them in a
 * reason or message of its own: on one line, every control and reordering mark shown as an escape
 * (`\x1b`, `\x9b`, `\u202e`), the rest as written. Found by an outside tester: an engine's last
 * words reached a 503's message, `lastError` and the admin API as printed, C1 controls and
 * bidirectional overrides included; valid JSON, but a client that printed the message obeyed them.
 */
export function engineWords(text: string): string {
  return printable(text, true);
}
