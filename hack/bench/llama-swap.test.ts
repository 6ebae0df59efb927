import { execFileSync } from "node:child_process";
import { describe, expect, test } from "vitest";
import { parse } from "yaml";
import { llamaSwapConfig } from "./llama-swap.ts";

describe("the llama-swap peer's configuration", () => {
  const argv = ["/opt/node", "/srv/snooze's bin.js", "sim", "--port", "${PORT}", "a b"];
  const config = parse(
    llamaSwapConfig({
      bench: { cmd: argv, proxy: "http://127.0.0.1:${PORT}" },
    }),
  );

  test("keeps the load under its concurrency limit and stdout quiet", () => {
    expect(config.logToStdout).toBe("none");
    expect(config.models.bench).toMatchObject({
      proxy: "http://127.0.0.1:${PORT}",
      checkEndpoint: "/health",
      ttl: 0,
      concurrencyLimit: 100_000,
    });
  });

  test("writes the command so a POSIX word split gives the argv back", () => {
    // llama-swap splits `cmd` like a POSIX shell; a real shell reads the same words.
    const words = execFileSync("sh", ["-c", `printf '%s\\n' ${config.models.bench.cmd}`], {
      encoding: "utf8",
    });
    expect(words.trimEnd().split("\n")).toEqual(argv);
  });
});
