import { expect, test } from "vitest";
import { outputFailureAction } from "./output-failures.ts";

const failure = (code: string, message: string) => Object.assign(new Error(message), { code });
const gone = failure("EPIPE", "write EPIPE");
const full = failure("ENOSPC", "ENOSPC: no space left on device, write");

test("a server loses the lines it cannot write, never its life", () => {
  for (const stream of ["stdout", "stderr"] as const)
    for (const error of [gone, full, failure("EIO", "write EIO")])
      expect(outputFailureAction(stream, error, "server", "snooze serve")).toEqual({ kind: "ignore" });
});

test("a command's answer: a reader gone is exit 0, any other failure is said with exit 1; stderr's own failure changes nothing", () => {
  expect(outputFailureAction("stdout", gone, "command", "snooze status")).toEqual({ kind: "exit", code: 0 });
  expect(outputFailureAction("stdout", full, "command", "snooze status")).toEqual({
    kind: "exit",
    code: 1,
    say: "snooze status: cannot write the output: ENOSPC: no space left on device, write",
  });
  expect(outputFailureAction("stderr", full, "command", "snooze status")).toEqual({ kind: "ignore" });
});
