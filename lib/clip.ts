/**
 * A client's or an engine's text in a message or attribute, kept to `max` characters. Never cut
 * between the two halves of a surrogate pair (an emoji): half of one is not text, and some clients
 * (Python's `print`) fail on it.
 */
export function clip(text: string, max = 200): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text[max - 1] ?? "") ? max - 1 : max;
  return `${text.slice(0, end)}…`;
}

/**
 * `text` kept to about `max` characters by cutting out its middle: both its start and its end say
 * something (an engine's error line: what it was doing, and the reason at its end).
 */
export function clipMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  const half = Math.floor(max / 2);
  let tail = text.slice(-half);
  if (/^[\uDC00-\uDFFF]/.test(tail)) tail = tail.slice(1);
  return `${clip(text, half).slice(0, -1)}…${tail}`;
}
