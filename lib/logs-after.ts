/**
 * The `after` of `GET /snooze/v1/models/{model}/logs`: how many lines of each engine a follower
 * (`snooze logs -f`) has read, as `<n>` for every engine or `<replica>:<n>,...` per engine. A
 * replica's id is its model's id and a number, and a model id may hold any character but whitespace
 * (`a,b`, `qwen:7b`), so each id is percent-encoded (a comma as `%2C`): the commas between the parts
 * and the last colon of each are the format's own.
 */

/** `after` for what has been read of each replica. */
export function formatLogsAfter(read: Iterable<readonly [replica: string, lines: number]>): string {
  return [...read].map(([replica, lines]) => `${encodeURIComponent(replica)}:${lines}`).join(",");
}

/**
 * How many lines of a replica `after` says were read (NaN: none given, so all that are kept), or
 * undefined when `after` is neither form (`abc`, `-5`), which is refused rather than read as "from
 * the start".
 */
export function parseLogsAfter(text: string | null): ((replica: string) => number) | undefined {
  if (text === null || text === "") return () => Number.NaN;
  if (/^\d+$/.test(text)) return () => Number(text);
  const read = new Map<string, number>();
  for (const part of text.split(",")) {
    const match = /^(.+):(\d+)$/.exec(part);
    if (!match) return undefined;
    read.set(decoded(match[1]!), Number(match[2]));
  }
  return (replica) => read.get(replica) ?? 0;
}

/** A replica id as sent; one that is not percent-encoding (`50%-1`) is taken as written. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
