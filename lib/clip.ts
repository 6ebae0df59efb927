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
