import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, metricValue, simCommand, until } from "../helpers/local-snooze.ts";
import { recordedEngines } from "../helpers/serve-process.ts";
import { cloudEventSink } from "../support/cloudevent-sink.ts";
import { gone, serveRuns } from "../support/serve-runs.ts";

// Config reload of a real `snooze serve` (SIGHUP and --watch-config) with `snooze sim` engines:
// models added, removed and changed while requests are held and in flight; none is lost.

const runs = serveRuns();
const start = runs.start;

/** The recorded engine of a model (one at most here), its process group kept for cleanup. */
function engineOf(stateDir: string, model: string) {
  const engine = recordedEngines(stateDir).find((e) => e.model === model) as
    | { model: string; pgid: number; command: string }
    | undefined;
  if (engine) runs.group(engine.pgid);
  return engine;
}

async function modelView(url: string, id: string) {
  const body = (await (await fetch(`${url}/v1/models`)).json()) as {
    data: { id: string; snooze: { tier: string; held: number; in_flight: number } }[];
  };
  return body.data.find((m) => m.id === id)?.snooze;
}

/** Whether the process has a handler for `signal` (Linux: /proc/<pid>/status, SigCgt). */
function catches(pid: number, signal: NodeJS.Signals): boolean {
  const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  const bit = 1n << BigInt(constants.signals[signal] - 1);
  return caught !== undefined && (BigInt(`0x${caught}`) & bit) !== 0n;
}

async function metrics(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

/** A chat request's status and text, and when its answer ended (ms, this clock). */
async function ask(url: string, model: string, extra: Record<string, unknown> = {}) {
  const response = await fetch(`${url}/v1/chat/completions`, chat(model, extra));
  const text = await response.text();
  return { status: response.status, text, endedAt: performance.now() };
}

describe("snooze serve reloads its settings", () => {
  test("SIGHUPs while it loads and starts: it serves, then reloads (before: Node's default ended it, silently)", async () => {
    // Found by an outside tester: a reloader fired right after a start (SIGHUP within 0.3 s) killed it.
    const config = `models:\n  qwen:\n    command: ${simCommand(["--load-time", "200ms"], 1)}\n`;
    const run = start(config);
    // From the moment its script runs: before that Node itself boots, and a SIGHUP then ends any
    // Node process. The kernel says when its first handlers are in place (the early SIGQUIT one:
    // Node itself catches SIGTERM and SIGINT from its start).
    await until(() => catches(run.child.pid!, "SIGQUIT"), 10_000, "snooze serve's first signal handlers");
    for (const ms of [0, 20, 60, 120]) {
      await new Promise((resolve) => setTimeout(resolve, ms));
      if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill("SIGHUP");
    }
    writeFileSync(run.config, `${config}  gemma:\n    command: ${simCommand(["--load-time", "200ms"], 1)}\n`);
    run.child.kill("SIGHUP");
    const url = await run.url;
    expect(run.child.signalCode).toBeNull();
    await until(
      async () => (await ask(url, "gemma", { max_tokens: 1 })).status === 200,
      10_000,
      "gemma, from the reload",
    );
    expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
  });

  test("SIGHUP: a model added and a changed command, while requests are held and in flight: none is lost", async () => {
    const qwen = (itl: string) => simCommand(["--load-time", "200ms", "--itl", itl], 1);
    const before = `
models:
  qwen:
    command: ${qwen("100ms")}
  mistral:
    command: ${simCommand(["--load-time", "3s"], 1)}
`;
    const run = start(before);
    const url = await run.url;
    expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
    const old = engineOf(run.stateDir, "qwen")!;
    // In flight: a stream from qwen (about 3 s). Held: mistral's 3 s cold start.
    const streaming = ask(url, "qwen", { stream: true, max_tokens: 60 });
    const held = ask(url, "mistral");
    await until(async () => (await modelView(url, "qwen"))?.in_flight === 1, 5_000, "qwen's stream");
    await until(async () => (await modelView(url, "mistral"))?.held === 1, 5_000, "mistral's held request");

    writeFileSync(
      run.config,
      `${before.replace(qwen("100ms"), qwen("20ms"))}  gemma:\n    command: ${simCommand(["--load-time", "200ms"], 1)}\n`,
    );
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    expect(run.stderr()).toMatch(/"restarted":\["qwen \(command\)"\]/);
    expect(run.stderr()).toMatch(/"added":\["gemma"\]/);
    // Sent while qwen's old engine drains: held, then served by the new one.
    const during = ask(url, "qwen");
    const added = await ask(url, "gemma");
    expect(added.status).toBe(200);

    const [stream, wasHeld, after] = await Promise.all([streaming, held, during]);
    expect(stream.status).toBe(200);
    expect(stream.text).toContain("data: [DONE]");
    // Whole: it ran to its end, with no error event.
    expect(stream.text).toMatch(/"finish_reason":"(length|stop)"/);
    expect(stream.text).not.toContain('"error"');
    expect(wasHeld.status).toBe(200);
    expect(after.status).toBe(200);
    // The request held during the drain was answered only after the stream finished on the old engine.
    expect(after.endedAt).toBeGreaterThan(stream.endedAt);
    const renewed = engineOf(run.stateDir, "qwen")!;
    expect(renewed.pgid).not.toBe(old.pgid);
    expect(renewed.command).toContain("--itl 20ms");
    expect(gone(old.pgid)).toBe(true);
    expect(run.stderr()).toContain("engine settings changed: draining, then restarting");
    expect(metricValue(await metrics(url), "snooze_config_reloads_total", { result: "applied" })).toBe(1);
    expect(metricValue(await metrics(url), "snooze_requests_total", { code: "503" })).toBe(0);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(recordedEngines(run.stateDir)).toEqual([]);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("an invalid file keeps the settings in use and logs file:line:column and the key", async () => {
    const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n    sleepAfter: 5m\n`;
    const run = start(yaml);
    const url = await run.url;
    writeFileSync(run.config, yaml.replace("sleepAfter: 5m", "sleepAfter: soon"));
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes("the settings file is not valid"), 5_000, "the refusal");
    expect(run.stderr()).toMatch(/snooze\.yaml:4:5: models\.qwen\.sleepAfter: expected a duration/);
    expect((await ask(url, "qwen")).status).toBe(200);
    const text = await metrics(url);
    expect(metricValue(text, "snooze_config_reloads_total", { result: "invalid" })).toBe(1);
    expect(metricValue(text, "snooze_config_reloads_total", { result: "applied" })).toBe(0);
    // Not only in the log: the admin API and `snooze status` say the file on disk is not what runs
    // (found by an outside tester: both looked normal).
    const state = async () =>
      (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
        models: unknown[];
        reloadFailure?: { at: string; cause: string; file: string; problems: string[] };
      };
    const failure = (await state()).reloadFailure;
    expect(failure).toEqual({
      at: expect.any(String),
      cause: "SIGHUP",
      file: run.config,
      problems: [expect.stringMatching(/snooze\.yaml:4:5: models\.qwen\.sleepAfter: expected a duration/)],
    });
    expect(Date.now() - Date.parse(failure!.at)).toBeLessThan(10_000);
    const status = (...args: string[]) =>
      execFileSync(process.execPath, ["bin/snooze.js", "status", "--url", url, ...args], {
        encoding: "utf8",
      });
    expect(status()).toMatch(
      /\n\nThe settings file .*snooze\.yaml was refused \d+(\.\d+)?m?s ago \(SIGHUP\); Snooze runs the settings it had:\n {2}.*snooze\.yaml:4:5: models\.qwen\.sleepAfter: expected a duration/,
    );
    expect(JSON.parse(status("--json")).reloadFailure).toEqual(failure);
    // Fixed, the next SIGHUP applies it, and the failure is gone.
    writeFileSync(run.config, yaml.replace("sleepAfter: 5m", "sleepAfter: 1m"));
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    expect(run.stderr()).toContain('"updated":["qwen (sleepAfter)"]');
    expect((await state()).reloadFailure).toBeUndefined();
    expect(status()).not.toContain("refused");
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("--watch-config: a file back after a SIGHUP refused it while gone ends the refusal, though it says what it said", async () => {
    // Found by an outside tester: the file moved away, a SIGHUP (refused: no file), the file moved
    // back unchanged; the watch saw its old text and reloaded nothing, so `snooze status` went on
    // saying the file was refused while it was the one that runs.
    const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n`;
    const run = start(yaml, ["--watch-config"]);
    const url = await run.url;
    const failure = async () =>
      ((await (await fetch(`${url}/snooze/v1/models`)).json()) as { reloadFailure?: unknown }).reloadFailure;
    // The watch has read the file as it was (its first read races a change made at once).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const away = `${run.config}.away`;
    renameSync(run.config, away);
    await until(() => run.stderr().includes("the settings file is gone"), 5_000, "the file gone");
    run.child.kill("SIGHUP");
    await until(async () => (await failure()) !== undefined, 5_000, "the SIGHUP refused");
    renameSync(away, run.config);
    await until(async () => (await failure()) === undefined, 5_000, "the refusal ended by the file back");
    expect(run.stderr()).toContain('"msg":"settings reloaded: nothing changed"');
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("a path that cannot be used (a directory in the file's place, a huge file) is an invalid file, said and counted, by the watch and by SIGHUP", async () => {
    // Found by an outside tester: the watch said "the settings file is gone" for a 545 MB file and
    // nothing for a directory; SIGHUP logged "reloading the settings failed: Cannot create a string
    // longer…" with no file, and neither was counted as invalid.
    const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n`;
    const run = start(yaml, ["--watch-config"]);
    const url = await run.url;
    const invalid = async () =>
      metricValue(await metrics(url), "snooze_config_reloads_total", { result: "invalid" });
    // The watch has read the file as it was (its first read races a change made at once).
    await new Promise((resolve) => setTimeout(resolve, 300));
    rmSync(run.config);
    mkdirSync(run.config);
    await until(async () => (await invalid()) === 1, 5_000, "the directory refused");
    expect(run.stderr()).toContain(`${run.config}: (top level): it is a directory, not a settings file`);
    rmSync(run.config, { recursive: true });
    writeFileSync(run.config, "");
    truncateSync(run.config, 545 * 1024 * 1024);
    await until(async () => (await invalid()) === 2, 5_000, "the huge file refused");
    expect(run.stderr()).toContain(`${run.config}: (top level): the file is 545 MiB`);
    run.child.kill("SIGHUP");
    await until(async () => (await invalid()) === 3, 5_000, "the huge file refused on SIGHUP");
    const said = run.stderr();
    expect(said.match(/the settings file is not valid; the settings in use stay/g)).toHaveLength(3);
    expect(said).not.toContain("the settings file is gone");
    expect(said).not.toContain("reloading the settings failed");
    expect((await ask(url, "qwen")).status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("SIGHUP with a large file: /healthz answers while it is parsed (before: the reload held the event loop as long, 1 to 3 s)", async () => {
    // Found by an outside tester: 9,000 top-level `x-` entries (645 KB) took the YAML library about
    // a second to parse, on the event loop; no request was proxied and every stream stalled meanwhile.
    const yaml = `models:\n  qwen:\n    command: ${simCommand()}\n`;
    const run = start(yaml);
    const url = await run.url;
    let large = `${yaml}  gemma:\n    command: ${simCommand()}\n`;
    for (let i = 0; large.length < 900 * 1024; i++)
      large += `x-own-${i}: &own${i} {a: "value ${i}", b: [1, 2, 3], c: true}\n`;
    // What the parse takes on this machine (here, on the test's thread): the stall it would be.
    const before = performance.now();
    parseConfig(large, "large.yaml");
    const parseMs = Math.round(performance.now() - before);
    writeFileSync(run.config, large);
    run.child.kill("SIGHUP");
    // Asked one after another until the reload applied: some are asked while the file is parsed.
    let slowest = 0;
    const deadline = Date.now() + 30_000;
    const applied = () => run.stderr().includes('"msg":"settings reloaded"');
    while (!applied() && Date.now() < deadline) {
      const asked = performance.now();
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      slowest = Math.max(slowest, performance.now() - asked);
    }
    expect(applied()).toBe(true);
    expect(run.stderr()).toContain('"added":["gemma"]');
    // A stall detector with room for a busy machine, not a benchmark: the parse takes over a second.
    expect(
      slowest,
      `the slowest /healthz during the reload (the parse takes ${parseMs} ms here)`,
    ).toBeLessThan(500);
    expect((await ask(url, "gemma", { max_tokens: 1 })).status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  }, 60_000);

  test("SIGHUP: models are listed in the file's order, an added one cold since it was added (found by an outside tester)", async () => {
    const models = (...ids: string[]) =>
      `models:\n${ids.map((id) => `  ${id}:\n    command: ${simCommand()}\n`).join("")}`;
    const run = start(models("ma", "mb"));
    const url = await run.url;
    let reloads = 0;
    /** Writes the file, sends SIGHUP, waits for the reload, and returns when the file was written. */
    const reload = async (yaml: string) => {
      // Later than the start by a clear margin: an added model's `since` is not the start's.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const at = Date.now();
      writeFileSync(run.config, yaml);
      run.child.kill("SIGHUP");
      reloads++;
      await until(
        () => run.stderr().split('"msg":"settings reloaded"').length > reloads,
        5_000,
        "the reload",
      );
      return at;
    };
    const listed = async () => {
      const open = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[] };
      const admin = (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
        models: { id: string; since: string }[];
      };
      return { open: open.data.map((m) => m.id), admin: admin.models };
    };
    const sinceOf = async (id: string) => Date.parse((await listed()).admin.find((m) => m.id === id)!.since);
    // Before: a model the file writes first was listed last, cold since the server started.
    const added = await reload(models("m0", "ma", "mb"));
    expect((await listed()).open).toEqual(["m0", "ma", "mb"]);
    expect((await listed()).admin.map((m) => m.id)).toEqual(["m0", "ma", "mb"]);
    expect(await sinceOf("m0")).toBeGreaterThanOrEqual(added);
    expect(await sinceOf("ma")).toBeLessThan(added);
    // Removed, then added back: in its place again, cold since it came back.
    await reload(models("ma", "mc"));
    await until(async () => (await listed()).open.join() === "ma,mc", 5_000, "m0 and mb removed");
    const back = await reload(models("ma", "mb", "mc"));
    await until(async () => (await listed()).open.includes("mb"), 5_000, "mb added back");
    expect((await listed()).open).toEqual(["ma", "mb", "mc"]);
    expect((await listed()).admin.map((m) => m.id)).toEqual(["ma", "mb", "mc"]);
    expect(await sinceOf("mb")).toBeGreaterThanOrEqual(back);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("SIGHUP: a new eventSink and eventMode take effect at once (before, at the next start; found by an outside tester)", async () => {
    const [first, second] = [await cloudEventSink(), await cloudEventSink()];
    try {
      const yaml = (sink: string, mode: string) =>
        `eventSink: ${sink}
eventMode: ${mode}
models:
  qwen:
    command: ${simCommand(["--load-time", "100ms"], 1)}
`;
      const run = start(yaml(first.url, "binary"));
      const url = await run.url;
      expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
      await until(() => first.arrivals.length >= 1, 5_000, "the start's event at the first sink");
      expect(first.arrivals[0]!.headers["ce-type"]).toBe("dev.snooze.replica.started");
      writeFileSync(run.config, yaml(second.url, "structured"));
      run.child.kill("SIGHUP");
      await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
      expect(run.stderr()).not.toContain("take effect at the next start");
      expect((await fetch(`${url}/snooze/v1/models/qwen/stop`, { method: "POST" })).status).toBe(200);
      await until(() => second.arrivals.length >= 1, 5_000, "the stop's event at the new sink");
      expect(second.arrivals[0]!.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
      expect(second.arrivals[0]!.event.type).toBe("dev.snooze.replica.stopped");
      // The new sink continues the process's sequence: same prefix, the next count (found by an
      // outside tester: it began anew, its prefix the reload's time).
      const [epoch, count] = String(first.arrivals[0]!.event.sequence).split("-");
      expect(second.arrivals[0]!.event.sequence).toBe(
        `${epoch}-${String(Number(count) + 1).padStart(10, "0")}`,
      );
      expect(first.arrivals.map((a) => a.event.type)).toEqual(["dev.snooze.replica.started"]);
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
    } finally {
      first.close();
      second.close();
    }
  });

  test("--watch-config: an editor's rename-replace removes a model (its stream finishes), adds one, changes settings without a restart", async () => {
    const before = `
models:
  qwen:
    command: ${simCommand(["--load-time", "200ms"], 1)}
    sleepAfter: 5m
  llama:
    command: ${simCommand(["--load-time", "200ms", "--itl", "100ms"], 1)}
`;
    const run = start(before, ["--watch-config"]);
    const url = await run.url;
    expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
    expect((await ask(url, "llama", { max_tokens: 1 })).status).toBe(200);
    const qwenEngine = engineOf(run.stateDir, "qwen")!;
    const llamaEngine = engineOf(run.stateDir, "llama")!;
    const streaming = ask(url, "llama", { stream: true, max_tokens: 40 });
    await until(async () => (await modelView(url, "llama"))?.in_flight === 1, 5_000, "llama's stream");
    const llamaSeries = await metrics(url);
    for (const gauge of ["snooze_replica_tier", "snooze_held_requests", "snooze_in_flight_requests"])
      expect(llamaSeries, gauge).toContain(`${gauge}{model="llama"`);

    // As vim and most editors save: a new file beside it, renamed over it.
    const after = before
      .replace("sleepAfter: 5m", "sleepAfter: 2m")
      .replace(/ {2}llama:\n.*\n/, `  gemma:\n    command: ${simCommand(["--load-time", "200ms"], 1)}\n`);
    const temporary = join(dirname(run.config), ".snooze.yaml.swp");
    writeFileSync(temporary, after);
    renameSync(temporary, run.config);
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    expect(run.stderr()).toMatch(/"cause":"file changed"/);

    const refused = await ask(url, "llama");
    expect(refused.status).toBe(404);
    expect(refused.text).toContain("gemma");
    expect((await ask(url, "gemma")).status).toBe(200);
    const stream = await streaming;
    expect(stream.status).toBe(200);
    expect(stream.text).toMatch(/"finish_reason":"(length|stop)"/);
    await until(() => run.stderr().includes('"msg":"model removed"'), 5_000, "llama's removal");
    expect(gone(llamaEngine.pgid)).toBe(true);
    // Its series went with it: gauges (found by an outside tester: the in-flight series stayed),
    // counters and histograms (found by a probe: about 60 series stayed for every model removed).
    const series = (await metrics(url)).split("\n").filter((line) => line.includes('model="llama"'));
    expect(series).toEqual([]);
    // Settings only: the same engine still serves qwen.
    expect((await ask(url, "qwen")).status).toBe(200);
    expect(engineOf(run.stateDir, "qwen")!.pgid).toBe(qwenEngine.pgid);
    expect(metricValue(await metrics(url), "snooze_config_reloads_total", { result: "applied" })).toBe(1);

    // A write that changes nothing the settings say (a comment) reloads nothing.
    writeFileSync(run.config, `# saved again\n${after}`);
    await until(() => run.stderr().includes("settings reloaded: nothing changed"), 5_000, "the no-op reload");
    expect(metricValue(await metrics(url), "snooze_config_reloads_total", { result: "unchanged" })).toBe(1);

    run.child.kill("SIGQUIT");
    expect(await run.exited).toBe(0);
    expect(recordedEngines(run.stateDir)).toEqual([]);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });
  test("SIGHUP: a model on a fixed port renamed while its engine streams: the new name's first request waits for the port", async () => {
    const port = await freePort();
    const before = `
models:
  b:
    port: ${port}
    command: ${simCommand(["--load-time", "200ms", "--itl", "50ms"], 1)}
`;
    const run = start(before);
    const url = await run.url;
    expect((await ask(url, "b", { max_tokens: 1 })).status).toBe(200);
    const old = engineOf(run.stateDir, "b")!;
    const streaming = ask(url, "b", { stream: true, max_tokens: 30 });
    await until(async () => (await modelView(url, "b"))?.in_flight === 1, 5_000, "b's stream");

    writeFileSync(run.config, before.replace("  b:", "  bb:"));
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    // Before: started beside b's engine, bb's could not bind the port and this request got a 503.
    const renamed = await ask(url, "bb");
    expect(renamed.status, renamed.text).toBe(200);
    const stream = await streaming;
    expect(stream.text).toMatch(/"finish_reason":"(length|stop)"/);
    expect(gone(old.pgid)).toBe(true);
    expect(run.stderr()).toContain("waiting for the engine that holds the model's port to stop");

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("SIGHUP: two models swap their fixed ports while one's engine streams: the other's start waits for that engine to leave", async () => {
    // Found by a probe: b's new engine started beside a's, which still held the port, and b's
    // request got a 503 saying "another process" held it (it was a's engine, on its way out).
    const [portA, portB] = [await freePort(), await freePort()];
    const model = (id: string, port: number) =>
      `  ${id}:\n    port: ${port}\n    command: ${simCommand(["--load-time", "200ms", "--itl", "50ms"], 1)}\n`;
    const run = start(`models:\n${model("a", portA)}${model("b", portB)}`);
    const url = await run.url;
    expect((await ask(url, "a", { max_tokens: 1 })).status).toBe(200);
    expect((await ask(url, "b", { max_tokens: 1 })).status).toBe(200);
    const streaming = ask(url, "a", { stream: true, max_tokens: 30 });
    await until(async () => (await modelView(url, "a"))?.in_flight === 1, 5_000, "a's stream");

    writeFileSync(run.config, `models:\n${model("a", portB)}${model("b", portA)}`);
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    const moved = await ask(url, "b");
    expect(moved.status, moved.text).toBe(200);
    expect((await streaming).text).toMatch(/"finish_reason":"(length|stop)"/);
    expect(run.stderr()).toContain("waiting for the engine that holds the model's port to stop");
    expect((await ask(url, "a", { max_tokens: 1 })).status).toBe(200);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("SIGHUP: a changed command undone while its engine drains for it keeps that engine: no restart, the held request served by it", async () => {
    // Found by a probe: the engine that ran the command restored was still drained and stopped,
    // and the requests held meanwhile waited for its drain and a cold start of the same command.
    const before = `\nmodels:\n  qwen:\n    drainTimeout: 30s\n    command: ${simCommand(["--load-time", "200ms", "--itl", "50ms"], 1)}\n`;
    const run = start(before);
    const url = await run.url;
    expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
    const engine = engineOf(run.stateDir, "qwen")!;
    const streaming = ask(url, "qwen", { stream: true, max_tokens: 60, ignore_eos: true });
    await until(async () => (await modelView(url, "qwen"))?.in_flight === 1, 5_000, "the stream");

    writeFileSync(run.config, before.replace('"200ms"', '"300ms"'));
    run.child.kill("SIGHUP");
    await until(
      () => run.stderr().includes("engine settings changed: draining"),
      5_000,
      "the restart's drain",
    );
    const held = ask(url, "qwen", { max_tokens: 1 });
    await until(async () => (await modelView(url, "qwen"))?.held === 1, 5_000, "the held request");
    writeFileSync(run.config, before);
    run.child.kill("SIGHUP");
    const answer = await held;
    expect(answer.status, answer.text).toBe(200);
    // Served by the engine that ran all along, before the stream (3 s) ended its drain.
    const stream = await streaming;
    expect(answer.endedAt).toBeLessThan(stream.endedAt);
    expect(stream.text).toContain('"finish_reason":"length"');
    expect(run.stderr()).toContain("engine settings as the engine runs them again: it stays");
    expect(recordedEngines(run.stateDir).map((e) => (e as { pgid: number }).pgid)).toEqual([engine.pgid]);
    expect((await modelView(url, "qwen"))?.tier).toBe("ready");

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("SIGTERM while a renamed model waits for its fixed port: its engine is not started once the port is free", async () => {
    // Found by an outside tester: the shutdown stopped the old engine, then started the new one.
    const port = await freePort();
    const before = `\nmodels:\n  b:\n    port: ${port}\n    command: ${simCommand(["--load-time", "200ms", "--itl", "50ms"], 1)}\n`;
    const run = start(before);
    const url = await run.url;
    expect((await ask(url, "b", { max_tokens: 1 })).status).toBe(200);
    const streaming = ask(url, "b", { stream: true, max_tokens: 30 });
    await until(async () => (await modelView(url, "b"))?.in_flight === 1, 5_000, "b's stream");
    writeFileSync(run.config, before.replace("  b:", "  bb:"));
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"msg":"settings reloaded"'), 5_000, "the reload");
    const renamed = ask(url, "bb");
    await until(
      () => run.stderr().includes("waiting for the engine that holds the model's port to stop"),
      5_000,
      "bb waiting for the port",
    );
    run.child.kill("SIGTERM");
    expect((await renamed).status).toBe(503);
    expect((await streaming).text).toMatch(/"finish_reason":"(length|stop)"/);
    expect(await run.exited).toBe(0);
    expect(run.stderr()).not.toMatch(/"msg":"engine starting"[^\n]*"model":"bb"/);
    expect(run.stderr()).toContain("engine not started: Snooze is shutting down");
    expect(recordedEngines(run.stateDir)).toEqual([]);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("SIGHUP: a command fixed during the back-off of its failures starts at once, not when the back-off ends", async () => {
    // Found by an outside tester: the fixed model waited out the old failures' back-off (up to a minute).
    const broken = simCommand(["--load-time", "200ms", "--no-such-flag"], 1);
    const before = `\nmodels:\n  qwen:\n    command: ${broken}\n`;
    const run = start(before);
    const url = await run.url;
    // Four failed starts in a row: the back-off is 0, 1, 2, then 4 s.
    for (let i = 0; i < 4; i++) expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(503);
    const view = async () =>
      (
        (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
          models: { id: string; retryAt?: string }[];
        }
      ).models[0]!;
    const retryAt = Date.parse((await view()).retryAt!);
    expect(retryAt).toBeGreaterThan(Date.now() + 1_000);

    writeFileSync(run.config, before.replace(broken, simCommand(["--load-time", "200ms"], 1)));
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"restarted":["qwen (command)"]'), 5_000, "the reload");
    expect((await view()).retryAt).toBeUndefined();
    expect((await ask(url, "qwen", { max_tokens: 1 })).status).toBe(200);
    expect(Date.now()).toBeLessThan(retryAt);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });

  test("SIGHUP: a model added on a fixed port that another model's engine got as a free port fails at once, not after it", async () => {
    const before = `
models:
  a:
    command: ${simCommand(["--load-time", "200ms"], 1)}
`;
    const run = start(before);
    const url = await run.url;
    expect((await ask(url, "a", { max_tokens: 1 })).status).toBe(200);
    const state = (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
      models: { id: string; replicas: { address: string }[] }[];
    };
    const port = Number(
      state.models
        .find((m) => m.id === "a")!
        .replicas[0]!.address.split(":")
        .at(-1),
    );
    writeFileSync(
      run.config,
      `${before}  c:\n    port: ${port}\n    command: ${simCommand(["--load-time", "200ms"], 1)}\n`,
    );
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes('"added":["c"]'), 5_000, "the reload");
    // a stays (it was given the port, not asked for it): c's start does not wait for it to leave.
    const taken = await fetch(`${url}/v1/chat/completions`, {
      ...chat("c"),
      signal: AbortSignal.timeout(20_000),
    });
    expect(taken.status).toBe(503);
    expect(await taken.text()).toContain(`port ${port}`);
    expect((await ask(url, "a", { max_tokens: 1 })).status).toBe(200);

    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const pgid of runs.groups) expect(gone(pgid)).toBe(true);
  });
});
