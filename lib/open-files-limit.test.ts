import { execFileSync } from "node:child_process";
import { expect, test } from "vitest";
import { openFilesLimit } from "./open-files-limit.ts";

const limits = (soft: string, hard: string) =>
  [
    "Limit                     Soft Limit           Hard Limit           Units     ",
    "Max processes             95544                95544                processes ",
    `Max open files            ${soft.padEnd(20)} ${hard.padEnd(20)} files     `,
    "",
  ].join("\n");

test("the soft limit on open files, as /proc/self/limits says it", () => {
  expect(openFilesLimit(() => limits("1024", "524288"))).toBe(1024);
  expect(openFilesLimit(() => limits("unlimited", "unlimited"))).toBeUndefined();
  expect(openFilesLimit(() => "")).toBeUndefined();
  expect(
    openFilesLimit(() => {
      throw new Error("ENOENT");
    }),
  ).toBeUndefined();
});

test.runIf(process.platform === "linux")(
  "this process's own limit, as `ulimit -n` gives it to a child",
  () => {
    const script = `import("${new URL("./open-files-limit.ts", import.meta.url).pathname}").then((m) => console.log(m.openFilesLimit()))`;
    const out = execFileSync(
      "sh",
      ["-c", 'ulimit -n 321 && exec "$0" "$@"', process.execPath, "-e", script],
      {
        encoding: "utf8",
      },
    );
    expect(out.trim()).toBe("321");
  },
);
