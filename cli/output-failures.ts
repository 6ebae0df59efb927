/**
 * What a write to stdout or stderr that fails does to the process. Found by an outside tester:
 * `snooze sim 2>&1 | head -1` died of an unhandled EPIPE at its second log line (so did `snooze
 * serve` for a line written before it read its settings), and `snooze status > /dev/full` ended in
 * a stack trace while `snooze --help > /dev/full` exited 0, its output lost without a word.
 */

/** Who writes: a command that prints its answer and ends, or a process that runs until stopped. */
export type Writer = "command" | "server";

/** What the process does about one failed write. */
export type OutputFailureAction = { kind: "ignore" } | { kind: "exit"; code: number; say?: string };

/**
 * The decision, pure. A server's lines are for whoever still reads them: one that cannot be written
 * (its reader gone, a full disk, a closed terminal) is lost, and serving goes on. A command's output
 * is its answer. A reader that went away after part of it was delivered (`| head -1`) has what it
 * wanted: exit 0, nothing said, as coreutils end quietly there (they die of SIGPIPE, which a shell
 * does not report unless `pipefail`). A reader gone before any of it was delivered (`| head -0`, a
 * pipe whose reader had died) or any other failure means the answer was lost: said on stderr with
 * exit 1, as coreutils say a write error. Found by an outside tester: a reader gone first ended in
 * exit 0 with nothing said. A failed stderr is never more than lost words: the exit code still tells.
 *
 * A stdout closed at start (`>&-`) is not told: Node puts /dev/null, read-write, on a standard
 * descriptor it finds closed, and Linux cannot tell that from a /dev/null a caller opened read-write
 * to throw the output away (Python's `subprocess.DEVNULL`, Node's `stdio: "ignore"`, a service
 * manager's null output), which must not fail.
 */
export function outputFailureAction(
  stream: "stdout" | "stderr",
  error: NodeJS.ErrnoException,
  writer: Writer,
  command: string,
  delivered: boolean,
): OutputFailureAction {
  if (stream === "stderr" || writer === "server") return { kind: "ignore" };
  if (error.code === "EPIPE" && delivered) return { kind: "exit", code: 0 };
  const why =
    error.code === "EPIPE" ? "its reader was gone before any of it was read (EPIPE)" : error.message;
  return { kind: "exit", code: 1, say: `${command}: cannot write the output: ${why}` };
}

let writer: Writer = "command";
let command = "snooze";
let watching = false;
/** Whether a write to stdout has completed: its reader had part of the answer. */
let delivered = false;

/** Does what `outputFailureAction` decides for `error`. */
function onFailure(stream: "stdout" | "stderr", error: NodeJS.ErrnoException): void {
  const action = outputFailureAction(stream, error, writer, command, delivered);
  if (action.kind === "ignore") return;
  if (action.say) process.stderr.write(`${action.say}\n`);
  process.exit(action.code);
}

/** Wraps stdout's `write` to learn whether any of the answer was delivered (its callback without an error). */
function watchDelivery(stream: NodeJS.WriteStream): void {
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  stream.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    if (typeof encoding === "function") [callback, encoding] = [encoding, undefined];
    return write(chunk, encoding, (error?: Error | null) => {
      if (!error) delivered = true;
      if (typeof callback === "function") callback(error);
    });
  }) as typeof stream.write;
}

/**
 * From now on a failed write to stdout or stderr is handled by `outputFailureAction`, for a command
 * named `name` (`snooze status`); called again (`snooze help status` runs main twice), it renames.
 */
export function watchOutputFailures(name: string): void {
  command = name;
  if (watching) return;
  watching = true;
  watchDelivery(process.stdout);
  for (const stream of ["stdout", "stderr"] as const)
    process[stream].on("error", (error: NodeJS.ErrnoException) => onFailure(stream, error));
}

/**
 * The command runs as a server from now on (its help, printed before, is still an answer): its
 * output failing costs the lines, not the process.
 */
export function outliveOutputFailures(): void {
  writer = "server";
}
