/**
 * The text a streamed chunk may carry while `stop` strings are in force, as vLLM's incremental
 * detokenizer releases it (`BaseIncrementalDetokenizer.get_next_output_text` with `delta`): until a
 * choice finishes, the last `max(len(stop)) - 1` characters of its text are held back, since they
 * may be the start of a stop string that a later token completes and that must not reach the
 * client; the finishing chunk carries what was held. With `include_stop_str_in_output` nothing is
 * held (the stop string is sent anyway). The joined text is the same either way; only where the
 * chunks split it differs.
 */
import type { StopRule } from "./stop-strings.ts";

/**
 * Characters held back at the end of a choice's text (vLLM's `stop_buffer_length`), counted as
 * Python counts a string's length: in code points.
 */
export function heldBack(rule: StopRule): number {
  if (rule.strings.length === 0 || rule.includeInOutput) return 0;
  return Math.max(...rule.strings.map((stop) => codePoints(stop).length)) - 1;
}

/**
 * What to send now of a choice's `text` (everything generated so far, already cut at a stop
 * string), `sent` code points of which went out before: all of the rest once it has `finished`,
 * else the rest but the last `held`; empty when the held tail covers everything new.
 */
export function releasable(text: string, sent: number, held: number, finished: boolean): string {
  const points = codePoints(text);
  const until = finished ? points.length : points.length - held;
  return until > sent ? points.slice(sent, until).join("") : "";
}

/** Code points, as Python indexes a string (a UTF-16 slice could split a surrogate pair). */
export function codePoints(text: string): string[] {
  return Array.from(text);
}
