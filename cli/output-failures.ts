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
 * is its answer: a reader that went away (`| head -1`) has what it wanted (exit 0, as before); any
 * other failure means the answer was not delivered, said on stderr with exit 1, as coreutils say a
 * write error. A failed stderr is never more than lost words: the exit code still tells.
 */
export function outputFailureAction(
  stream: "stdout" | "stderr",
  error: NodeJS.ErrnoException,
  writer: Writer,
  command: string,
): OutputFailureAction {
  if (stream === "stderr" || writer === "server") return { kind: "ignore" };
  if (error.code === "EPIPE") return { kind: "exit", code: 0 };
  return { kind: "exit", code: 1, say: `${command}: cannot write the output: ${error.message}` };
}

let writer: Writer = "command";
let command = "snooze";
let watching = false;

/**
 * From now on a failed write to stdout or stderr is handled by `outputFailureAction`, for a command
 * named `name` (`snooze status`); called again (`snooze help status` runs main twice), it renames.
 */
export function watchOutputFailures(name: string): void {
  command = name;
  if (watching) return;
  watching = true;
  for (const stream of ["stdout", "stderr"] as const)
    process[stream].on("error", (error: NodeJS.ErrnoException) => {
      const action = outputFailureAction(stream, error, writer, command);
      if (action.kind === "ignore") return;
      if (action.say) process.stderr.write(`${action.say}\n`);
      process.exit(action.code);
    });
}

/**
 * The command runs as a server from now on (its help, printed before, is still an answer): its
 * output failing costs the lines, not the process.
 */
export function outliveOutputFailures(): void {
  writer = "server";
}
