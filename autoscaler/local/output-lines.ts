import { StringDecoder } from "node:string_decoder";

/**
 * One output stream of an engine, cut into lines where its line ends are, not where its pipe's
 * chunks end: Python (vLLM) writes to a pipe in 8 KiB blocks, which cut a line, and a UTF-8
 * character, in two. A carriage return ends a line too (a progress bar's updates, each a line). What
 * waits for its end is kept to about `max` characters, its start and its end, as a whole line is
 * clipped later.
 */
export class OutputLines {
  private readonly decoder = new StringDecoder("utf8");
  private readonly max: number;
  private pending = "";

  constructor(max: number) {
    this.max = max;
  }

  /** The lines `chunk` ends. */
  push(chunk: Buffer): string[] {
    const lines = (this.pending + this.decoder.write(chunk)).split(/\r\n?|\n/);
    const rest = lines.pop()!;
    this.pending = rest.length > 2 * this.max ? `${rest.slice(0, this.max)}…${rest.slice(-this.max)}` : rest;
    return lines;
  }

  /**
   * The line begun and not ended yet, as it stands (kept short as `push` keeps it): what an engine
   * that waits shows last (a prompt, a progress bar's current state, each written after its line
   * end).
   */
  unfinished(): string {
    return this.pending;
  }

  /** The stream ended (or was given up): its last line, if it had no line end. */
  end(): string[] {
    const rest = this.pending + this.decoder.end();
    this.pending = "";
    return rest === "" ? [] : [rest];
  }
}
