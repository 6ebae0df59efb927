import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import {
  groupMembers,
  recordedEngines,
  running,
  scratchDir,
  serveProcess,
  writeConfig,
} from "../helpers/serve-process.ts";
import { gone, serveRuns } from "../support/serve-runs.ts";

// Engines never outlive `snooze serve`: real processes, every engine under its guard in a process
// group of its own, the record of engines in a state directory per test.

const runs = serveRuns();

const snooze = resolve("bin/snooze.js");
/** A sim command line for `sh -c`, with the engine's delays scaled down. */
const simLine = `'${process.execPath}' '${snooze}' sim --served-model-name \${MODEL} --port \${PORT} --time-scale 0.05`;

function start(yaml: string, args: string[] = [], options: Parameters<typeof runs.start>[2] = {}) {
  return runs.start(yaml, ["--shutdown-grace", "5s", ...args], options);
}

/** Starts the model's engine with a request; its process group, from the record of engines. */
async function engineOf(url: string, stateDir: string, model: string): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, chat(model, { max_tokens: 1 }));
  expect(response.status).toBe(200);
  await response.text();
  const engine = recordedEngines(stateDir).find((e) => e.model === model);
  expect(engine).toBeDefined();
  runs.group(engine!.pgid);
  return engine!.pgid;
}

/**
 * `snooze serve` run with `dir` bind-mounted read-only in a mount namespace of its own (unshare -m),
 * for a state directory it cannot write though it is root.
 */
function readOnlyWrapper(dir: string): string[] {
  const script = `mount --bind "$D" "$D" && mount -o remount,bind,ro "$D" && exec "$NODE" "$SNOOZE" "$@"`;
  return [
    "env",
    `D=${dir}`,
    `NODE=${process.execPath}`,
    `SNOOZE=${snooze}`,
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    script,
    "sh",
  ];
}

/**
 * A `snooze serve` with one engine on a fixed port, killed (SIGKILL) with the engine's guard: the
 * engine is left running, recorded in the state directory, and nobody is left to stop it.
 */
async function orphanedEngine() {
  const port = await freePort();
  // Its output goes nowhere: an engine writing to the pipe of a dead Snooze may die of it, and
  // this one has to outlive its Snooze and its guard.
  const line = `exec ${simLine} >/dev/null 2>&1`;
  const yaml = `models:\n  qwen:\n    port: ${port}\n    command: ["sh", "-c", ${JSON.stringify(line)}]\n`;
  const dir = scratchDir();
  const stateDir = join(dir, "state");
  const config = writeConfig(yaml, dir);
  const args = ["--state-dir", stateDir, "--stop-grace", "2s"];
  const first = serveProcess(config, args);
  runs.track(first.child);
  const pgid = await engineOf(await first.url, stateDir, "qwen");
  await killWithGuard(first, pgid);
  expect(groupMembers(pgid)).toHaveLength(1); // the orphaned engine, still serving its port
  return { port, config, args, stateDir, pgid };
}

/**
 * SIGKILL of a `snooze serve` and its engine's guard (`pgid`), so that nobody is left to stop the
 * engine. Both are frozen first: killed one after the other, the one still alive could see the other
 * go and stop the engine in between (the guard does when its Snooze dies), a flaky race.
 */
async function killWithGuard(serve: ReturnType<typeof serveProcess>, pgid: number): Promise<void> {
  serve.child.kill("SIGSTOP");
  process.kill(pgid, "SIGSTOP");
  serve.child.kill("SIGKILL");
  process.kill(pgid, "SIGKILL");
  await serve.exited;
  await until(() => !running(pgid), 2_000, "the guard to die");
}

describe("engines never outlive snooze serve", () => {
  test("SIGKILL of snooze serve: the guard stops its engine's process group within seconds", async () => {
    const run = start(`models:\n  qwen:\n    command: ${simCommand()}\n`);
    const pgid = await engineOf(await run.url, run.stateDir, "qwen");
    expect(groupMembers(pgid).length).toBeGreaterThanOrEqual(2); // the guard and the engine
    run.child.kill("SIGKILL");
    await until(() => gone(pgid), 4_000, "the engine's process group to go");
  });

  test("a restart after SIGKILL stops what the killed one left (guard killed too) before it binds a fixed port", async () => {
    const { port, config, args, stateDir, pgid } = await orphanedEngine();
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);

    const second = serveProcess(config, args);
    runs.track(second.child);
    const url = await second.url;
    expect(second.stderr()).toContain("stopping engines a previous snooze serve left running");
    expect(gone(pgid)).toBe(true);
    const next = await engineOf(url, stateDir, "qwen");
    expect(next).not.toBe(pgid);
    expect(recordedEngines(stateDir)).toHaveLength(1);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    expect(gone(next)).toBe(true);
    expect(recordedEngines(stateDir)).toHaveLength(0);
  });

  test("a restart whose --state-dir is read-only stops what the killed one left, then refuses to start (exit 2)", async () => {
    // Found by a probe: it exited 2 before reading the records, and the engine ran on.
    const { config, args, stateDir, pgid } = await orphanedEngine();

    // The second sees the state directory read-only: a read-only bind mount in a mount namespace
    // of its own (root ignores file modes), the directory writable for everyone else.
    const second = serveProcess(config, args, { command: readOnlyWrapper(stateDir) });
    runs.track(second.child);
    expect(await second.exited).toBe(2);
    expect(second.stderr()).toContain("stopping engines a previous snooze serve left running");
    expect(second.stderr()).toMatch(/--state-dir .* cannot be used, as files cannot be written there/);
    expect(second.stderr()).not.toContain('"msg":"listening"');
    expect(gone(pgid)).toBe(true);
  });

  test("SIGTERM while a restart waits for a killed one's engine that ignores SIGTERM: it is killed, and Snooze exits at once without serving (found by an outside tester)", async () => {
    // Before: the restart waited out the stop grace for the leftover, then bound its port and
    // logged "listening", and only then shut down (the docs say a SIGTERM while it starts ends it at once).
    const engine = `process.on("SIGTERM", () => {}); require("node:http").createServer((q, s) => s.end("{}")).listen(Number(process.argv[1]), "127.0.0.1")`;
    const yaml = `models:\n  stubborn:\n    sleep: false\n    warmup: false\n    command: [${JSON.stringify(process.execPath)}, -e, ${JSON.stringify(engine)}, "\${PORT}"]\n`;
    const dir = scratchDir();
    const stateDir = join(dir, "state");
    const config = writeConfig(yaml, dir);
    const args = ["--state-dir", stateDir, "--stop-grace", "30s"];
    const first = serveProcess(config, args);
    runs.track(first.child);
    const pgid = await engineOf(await first.url, stateDir, "stubborn");
    await killWithGuard(first, pgid); // its guard too: nobody else will stop the engine
    expect(groupMembers(pgid)).toHaveLength(1);

    const second = serveProcess(config, args);
    runs.track(second.child);
    await until(
      () => second.stderr().includes("stopping engines a previous snooze serve left running"),
      10_000,
      "the restart to stop the leftover",
    );
    const signalled = performance.now();
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(5_000);
    expect(second.stderr()).not.toContain('"msg":"listening"');
    expect(gone(pgid)).toBe(true);
    expect(recordedEngines(stateDir)).toHaveLength(0);
  }, 30_000);

  test("SIGTERM stops wrapper engines whole: sh -c exec …, and sh -c that does not exec", async () => {
    const run = start(`
models:
  execs:
    command: ["sh", "-c", ${JSON.stringify(`exec ${simLine}`)}]
  wraps:
    command: ["sh", "-c", ${JSON.stringify(`${simLine}; true`)}]
`);
    const url = await run.url;
    const pgids = [await engineOf(url, run.stateDir, "execs"), await engineOf(url, run.stateDir, "wraps")];
    expect(groupMembers(pgids[1]!).length).toBeGreaterThanOrEqual(3); // guard, sh, node
    const started = Date.now();
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(4_000);
    for (const pgid of pgids) expect(groupMembers(pgid)).toEqual([]);
  });

  test("a second SIGTERM during the grace stops at once: the stream ends shutting_down, the engine killed", async () => {
    const run = start(
      `models:\n  qwen:\n    command: ${simCommand(["--load-time", "100ms", "--itl", "50ms"], 1)}\n`,
      ["--shutdown-grace", "30s"],
    );
    const url = await run.url;
    const pgid = await engineOf(url, run.stateDir, "qwen");
    const streaming = await fetch(
      `${url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 400 }),
    );
    const text = streaming.text().catch((error: Error) => `cut: ${error.message}`);
    run.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 500));
    expect(run.child.exitCode).toBeNull(); // the graceful shutdown waits for the 20 s stream
    const started = Date.now();
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(1);
    expect(Date.now() - started).toBeLessThan(3_000);
    // The client hears that Snooze shut down, not that its engine broke off (found by an outside
    // tester: `upstream_broken`, "the engine stopped…", as the engine was killed first).
    const streamed = await text;
    expect(streamed).toContain('"code":"shutting_down"');
    expect(streamed).not.toContain("upstream_broken");
    expect(streamed.trim().endsWith("data: [DONE]")).toBe(true);
    expect(run.stderr()).toContain("second stop signal: stopping now");
    expect(gone(pgid)).toBe(true);
  });

  test("SIGINT and SIGQUIT each end snooze serve cleanly with no engine left (SIGHUP reloads)", async () => {
    const signals = ["SIGINT", "SIGQUIT"] as const;
    await Promise.all(
      signals.map(async (signal) => {
        const run = start(`models:\n  qwen:\n    command: ${simCommand()}\n`);
        const pgid = await engineOf(await run.url, run.stateDir, "qwen");
        run.child.kill(signal);
        expect(await run.exited).toBe(0);
        expect(gone(pgid)).toBe(true);
        expect(recordedEngines(run.stateDir)).toEqual([]);
      }),
    );
  });

  const npx = spawnSync("npx", ["--version"], { encoding: "utf8" }).status === 0;
  test.skipIf(!npx)(
    "npx snooze serve sent SIGTERM: npm does not pass it on, snooze serve sees its parent go",
    async () => {
      const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` };
      const run = start(`models:\n  qwen:\n    command: ${simCommand()}\n`, [], {
        command: ["npx", "snooze"],
        env,
      });
      const url = await run.url;
      const pid = Number(/"msg":"listening"[^\n]*?"pid":(\d+)/.exec(run.stderr())![1]);
      const pgid = await engineOf(url, run.stateDir, "qwen");
      run.child.kill("SIGTERM");
      await until(() => !running(pid), 5_000, "snooze serve to stop after its parent");
      expect(gone(pgid)).toBe(true);
    },
  );
});

describe("what an engine is started with", () => {
  test("${MODEL} and ${PORT} in env values are substituted, and $${…} reaches a shell as ${…}", async () => {
    // The shell takes the served name and the port from the environment (`$${NAME}` is its own
    // `${NAME}`): the engine answers, and its warm-up works, only if both were substituted there.
    const line = `exec '${process.execPath}' '${snooze}' sim --served-model-name "$\${SERVED}" --port "$\${LISTEN}" --time-scale 0.05`;
    const run = start(
      `models:\n  qwen:\n    env: {SERVED: "\${MODEL}", LISTEN: "\${PORT}"}\n    command: ["sh", "-c", ${JSON.stringify(line)}]\n`,
    );
    await engineOf(await run.url, run.stateDir, "qwen");
  });
});
