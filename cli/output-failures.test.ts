import { expect, test } from "vitest";
import { outputFailureAction } from "./output-failures.ts";

const failure = (code: string, message: string) => Object.assign(new Error(message), { code });
const gone = failure("EPIPE", "write EPIPE");
const full = failure("ENOSPC", "ENOSPC: no space left on device, write");

test("a server loses the lines it cannot write, never its life", () => {
  for (const stream of ["stdout", "stderr"] as const)
    for (const error of [gone, full, failure("EIO", "write EIO")])
      for (const delivered of [false, true])
        expect(outputFailureAction(stream, error, "server", "snooze serve", delivered)).toEqual({
          kind: "ignore",
        });
});

test("a command's answer: a reader gone after part of it is exit 0, any other failure is said with exit 1; stderr's own failure changes nothing", () => {
  expect(outputFailureAction("stdout", gone, "command", "snooze status", true)).toEqual({
    kind: "exit",
    code: 0,
  });
  // `| head -0`, or a reader that died before the command wrote: nothing of the answer arrived.
  expect(outputFailureAction("stdout", gone, "command", "snooze status", false)).toEqual({
    kind: "exit",
    code: 1,
    say: "snooze status: cannot write the output: its reader was gone before any of it was read (EPIPE)",
  });
  for (const delivered of [false, true])
    expect(outputFailureAction("stdout", full, "command", "snooze status", delivered)).toEqual({
      kind: "exit",
      code: 1,
      say: "snooze status: cannot write the output: ENOSPC: no space left on device, write",
    });
  expect(outputFailureAction("stderr", full, "command", "snooze status", false)).toEqual({ kind: "ignore" });
});
