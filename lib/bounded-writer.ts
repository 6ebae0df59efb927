/** The part of a writable stream (stderr) a bounded writer uses. */
export interface LineStream {
  write(text: string): boolean;
  once(event: "drain", listener: () => void): unknown;
  readonly writableLength: number;
  readonly destroyed: boolean;
}

/**
 * Writes lines to `stream` holding at most about `maxQueued` characters in Node's queue for it; the
 * lines that come while it is fuller are dropped, counted, and said in one line (`dropped(count)`)
 * once the stream has taken what it held. Found by an outside tester: stderr into a pipe whose
 * reader stopped reading (a stuck log shipper, `| less` left unscrolled) is written asynchronously,
 * and `snooze serve` at debug level with a talkative engine grew by 17 MB a second, without end.
 * A stream that never queues (a file, a terminal: written synchronously) is written as before; one
 * destroyed (its reader gone) takes nothing, and nothing is counted for it.
 */
export function boundedWriter(
  stream: LineStream,
  maxQueued: number,
  dropped: (count: number) => string,
): (line: string) => void {
  let count = 0;
  const tell = () => {
    const lost = count;
    count = 0;
    if (!stream.destroyed) stream.write(dropped(lost));
  };
  return (line) => {
    if (stream.destroyed) return;
    // Once dropping, until the queue drains: the notice then comes before the lines after it.
    if (count > 0 || stream.writableLength >= maxQueued) {
      if (count++ === 0) stream.once("drain", tell);
      return;
    }
    stream.write(line);
  };
}
