import { expect, test } from "vitest";
import { placeholderProblem, substitutePlaceholders } from "./placeholders.ts";

const values = { PORT: "43015", HOST: "127.0.0.1", MODEL: "qwen" };

test("${PORT}, ${HOST} and ${MODEL} are replaced wherever they are in the text", () => {
  expect(substitutePlaceholders("--url=http://${HOST}:${PORT}/${MODEL}", values)).toBe(
    "--url=http://127.0.0.1:43015/qwen",
  );
});

test("$${ is a literal ${; $NAME and a lone $$ are left for a shell", () => {
  expect(substitutePlaceholders("echo $${HOME} $${PORT} $HOME $$", values)).toBe(
    "echo ${HOME} ${PORT} $HOME $$",
  );
  // The escape takes `$${` only: a `$` before it stays, and what follows is read on.
  expect(substitutePlaceholders("$$${PORT} $${${PORT}}", values)).toBe("$${PORT} ${43015}");
  expect(placeholderProblem("echo $${HOME} $HOME", { in: "command" })).toBeUndefined();
});

test("anything else in ${…} is a problem, in a command argument and in env", () => {
  for (const text of ["${PROT}", "x${HOME}", "${}", "${ PORT }", "${HOME:-/root}"])
    expect(placeholderProblem(text, { in: "command" }), text).toMatch(/is not a placeholder/);
  expect(placeholderProblem("${SNOOZE}", { in: "command" })).toBeUndefined();
  expect(placeholderProblem("${SNOOZE}", { in: "env" })).toMatch(/only as a command argument/);
  expect(placeholderProblem("${SNOOZE} sim", { in: "command" })).toMatch(/must be an argument of its own/);
});
