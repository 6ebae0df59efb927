/**
 * A URL as it may be written to a log: its password and the values of its query redacted (a sink
 * or a collector is often reached with credentials in its URL: `https://user:key@host/?token=…`).
 * What is left still says where it points. Text that is not a URL, or holds neither, comes back as
 * it is. Also used for a value a settings problem quotes (a sink's URL with a typo in its scheme).
 */
export function redactUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text;
  }
  // Nothing to hide: as written (not as the URL parser would spell it).
  if (!url.password && !url.search) return text;
  if (url.password) url.password = "redacted";
  for (const name of new Set(url.searchParams.keys())) url.searchParams.set(name, "redacted");
  return url.href;
}
