import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import { scratchDir, writeConfig } from "../helpers/serve-process.ts";

/**
 * Found by an outside tester: `snooze sim 2>&1 | head -1` died of an unhandled EPIPE at its second
 * log line, `snooze serve` did for a line written before it read its settings, and `snooze status >
 * /dev/full` ended in a stack trace while `snooze --help > /dev/full` exited 0 having printed nothing.
 */
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

/** `snooze <args>` whose stdout or stderr is a pipe no one reads any more (`| head -1` gone). */
function withReaderGone(args: string[], gone: "stdout" | "stderr", env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, ["bin/snooze.js", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  children.push(child);
  child[gone]!.destroy();
  let other = "";
  child[gone === "stdout" ? "stderr" : "stdout"]!.on("data", (chunk) => (other += chunk));
  const code = new Promise<number | null>((resolve) => child.once("close", resolve));
  return { child, code, other: () => other };
}

/** Whether `url` answers 200 now. */
const answers = (url: string, init?: RequestInit) =>
  fetch(url, { ...init, signal: AbortSignal.timeout(2_000) }).then(
    (response) => response.ok,
    () => false,
  );

describe("a server whose stdout or stderr reader went away keeps serving, and stops cleanly", () => {
  test("snooze sim: its log lines past the first are lost, not its life", async () => {
    const port = await freePort();
    for (const gone of ["stderr", "stdout"] as const) {
      const sim = withReaderGone(["sim", "--port", String(port), "--load-time", "300ms"], gone);
      // Loaded: its `loading` and `ready` lines, at least, went to the closed pipe.
      await until(() => answers(`http://127.0.0.1:${port}/v1/models`), 10_000, "the simulator serving");
      expect(
        (
          await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
            ...chat("sim-model"),
            signal: AbortSignal.timeout(5_000),
          })
        ).status,
      ).toBe(200);
      sim.child.kill("SIGTERM");
      expect(await sim.code).toBe(0);
      expect(sim.other()).not.toContain("EPIPE");
    }
  });

  test("snooze serve: a line before it reads its settings (an unknown SNOOZE_LOG_LEVEL) and every one after are lost, not its life", {
    timeout: 30_000,
  }, async () => {
    const dir = scratchDir();
    const config = writeConfig(`models:\n  qwen:\n    command: ${simCommand()}\n`, dir);
    const port = await freePort();
    const serve = withReaderGone(
      ["serve", "--config", config, "--port", String(port), "--state-dir", join(dir, "state")],
      "stderr",
      { SNOOZE_LOG_LEVEL: "verbose" },
    );
    const url = `http://127.0.0.1:${port}`;
    await until(() => answers(`${url}/v1/models`), 10_000, "snooze serve serving");
    // A cold start: tier lines, the engine starting, its readiness, all written to the closed pipe.
    const response = await fetch(`${url}/v1/chat/completions`, {
      ...chat("qwen"),
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(200);
    serve.child.kill("SIGTERM");
    expect(await serve.code).toBe(0);
  });
});

describe("a command whose output cannot be written", () => {
  /** `snooze <args>` with stdout on /dev/full: every write fails with ENOSPC. */
  async function toFullDisk(args: string[], env: NodeJS.ProcessEnv = {}) {
    const full = openSync("/dev/full", "w");
    try {
      const child = spawn(process.execPath, ["bin/snooze.js", ...args], {
        stdio: ["ignore", full, "pipe"],
        env: { ...process.env, ...env },
      });
      children.push(child);
      let stderr = "";
      child.stderr!.on("data", (chunk) => (stderr += chunk));
      const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
      return { code, stderr };
    } finally {
      closeSync(full);
    }
  }

  test("says so on stderr and exits 1, with no stack trace: help, version and an answer alike", async () => {
    const cases: [string[], string][] = [
      [["--help"], "snooze: "],
      [["--version"], "snooze: "],
      [["status", "--help"], "snooze status: "],
      [["serve", "--help"], "snooze serve: "],
      [["help", "logs"], "snooze logs: "],
    ];
    for (const [args, prefix] of cases) {
      const run = await toFullDisk(args);
      expect({ args, code: run.code }).toEqual({ args, code: 1 });
      expect(run.stderr).toBe(`${prefix}cannot write the output: ENOSPC: no space left on device, write\n`);
    }
  });

  test("a reader gone before the first byte (`| head -0`): exit 1 saying so; output thrown away is no failure", async () => {
    // Found by an outside tester: it exited 0 with the answer lost (a reader gone was taken for
    // `| head -1`, which had what it wanted).
    const cases: [string[], string][] = [
      [["--help"], "snooze: "],
      [["--version"], "snooze: "],
      [["status", "--help"], "snooze status: "],
      [["sim", "--help"], "snooze sim: "],
    ];
    for (const [args, prefix] of cases) {
      const gone = withReaderGone(args, "stdout");
      expect({ args, code: await gone.code, stderr: gone.other() }).toEqual({
        args,
        code: 1,
        stderr: `${prefix}cannot write the output: its reader was gone before any of it was read (EPIPE)\n`,
      });
    }
    // Thrown away on purpose: write-only (`> /dev/null`), and read-write as Node's `stdio: "ignore"`
    // and Python's `subprocess.DEVNULL` open it (which Linux cannot tell from a stdout closed at start).
    const discarded = spawn("sh", ["-c", 'exec "$0" bin/snooze.js --help > /dev/null', process.execPath], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(discarded);
    expect((await once(discarded, "close"))[0]).toBe(0);
    const ignored = spawn(process.execPath, ["bin/snooze.js", "--help"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(ignored);
    let stderr = "";
    ignored.stderr!.on("data", (chunk) => (stderr += chunk));
    expect({ code: (await once(ignored, "close"))[0], stderr }).toEqual({ code: 0, stderr: "" });
  });

  test("snooze status against a running Snooze: exit 1 saying the output could not be written", {
    timeout: 30_000,
  }, async () => {
    const dir = scratchDir();
    const config = writeConfig(`models:\n  qwen:\n    command: ${simCommand()}\n`, dir);
    const port = await freePort();
    const serve = withReaderGone(
      ["serve", "--config", config, "--port", String(port), "--state-dir", join(dir, "state")],
      "stdout",
    );
    const url = `http://127.0.0.1:${port}`;
    await until(() => answers(`${url}/v1/models`), 10_000, "snooze serve serving");
    for (const args of [["status"], ["status", "--json"]]) {
      const run = await toFullDisk(args, { SNOOZE_URL: url });
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        "snooze status: cannot write the output: ENOSPC: no space left on device, write\n",
      );
    }
    serve.child.kill("SIGTERM");
    expect(await serve.code).toBe(0);
  });
});
