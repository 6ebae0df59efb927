/** A client's or an engine's text in a message or attribute, kept to `max` characters. */
export function clip(text: string, max = 200): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
