import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import type { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, metricValue, simCommand, startWith, until } from "../helpers/local-snooze.ts";
import { serveProcess } from "../helpers/serve-process.ts";

/**
 * A frozen engine (SIGSTOP: the kernel still accepts its connections, nothing answers) must not
 * hang requests, nor keep Snooze from stopping.
 */
const frozen: number[] = [];
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const pid of frozen.splice(0)) {
    try {
      process.kill(pid, "SIGCONT");
    } catch {}
  }
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function freeze(pid: number): void {
  process.kill(pid, "SIGSTOP");
  frozen.push(pid);
}

function thaw(pid: number): void {
  process.kill(pid, "SIGCONT");
  frozen.splice(frozen.indexOf(pid), 1);
}

/** Reads an SSE response until the first data event, then returns the rest as a promise of text. */
async function firstEventThenRest(response: Response): Promise<{ first: string; rest: Promise<string> }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("\n\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    let more = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return more;
      more += decoder.decode(value, { stream: true });
    }
  })();
  return { first: text, rest };
}

describe("a frozen engine (in-process Snooze)", () => {
  let snooze: LocalSnooze;

  test("mid-stream: an SSE error event after idleTimeout; before the answer: 504 after firstByteTimeout; thawed: served again", async () => {
    snooze = await startWith(`
models:
  qwen:
    firstByteTimeout: 800ms
    idleTimeout: 800ms
    command: ${simCommand(["--load-time", "100ms", "--itl", "50ms", "--ttft", "10ms"], 1)}
`);
    cleanups.push(() => snooze.close(500));
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen", { max_tokens: 1 }))).status).toBe(
      200,
    );
    const replica = snooze.activator.routes.get("qwen")!.replicas()[0]!.id;
    // The engine's process, or a wrapper of it: stop them all.
    const top = (snooze.platform as LocalPlatform).pid(replica)!;
    const pids = [top, ...descendants(top)];

    const stream = await fetch(
      `${snooze.url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 200, ignore_eos: true }),
    );
    const { first, rest } = await firstEventThenRest(stream);
    expect(first).toContain("chat.completion.chunk");
    for (const pid of pids) freeze(pid);
    const frozenAt = performance.now();
    const tail = await rest;
    const ended = performance.now() - frozenAt;
    const events = tail.split("\n\n").filter(Boolean);
    const error = events.map((e) => e.slice("data: ".length)).find((e) => e.includes('"error"'));
    expect(JSON.parse(error!).error).toMatchObject({ code: "upstream_idle_timeout" });
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(ended).toBeLessThan(5_000);

    const started = performance.now();
    const plain = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen", { max_tokens: 2 }));
    expect(plain.status).toBe(504);
    expect(((await plain.json()) as any).error.code).toBe("upstream_timeout");
    expect(performance.now() - started).toBeLessThan(5_000);

    const metrics = await snooze.registry.metrics();
    expect(metricValue(metrics, "snooze_upstream_errors_total", { reason: "idle-timeout" })).toBe(1);
    expect(metricValue(metrics, "snooze_upstream_errors_total", { reason: "first-byte-timeout" })).toBe(1);

    for (const pid of pids) thaw(pid);
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen", { max_tokens: 2 }))).status).toBe(
      200,
    );
  }, 30_000);
});

/** The processes below `pid` (Linux /proc), depth first. */
function descendants(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
  return children.flatMap((child) => [child, ...descendants(child)]);
}

const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
  } catch {
    return "";
  }
};

describe("snooze serve --shutdown-grace with a frozen engine", () => {
  test("SIGTERM: the stream ends with an SSE error event after the grace, and the process exits", async () => {
    const dir = mkdtempSync(join(tmpdir(), "snooze-abuse-"));
    const config = join(dir, "snooze.yaml");
    writeFileSync(
      config,
      `
models:
  qwen:
    command: ${simCommand(["--load-time", "100ms", "--itl", "50ms", "--ttft", "10ms"], 1)}
`,
    );
    const run = serveProcess(config, ["--shutdown-grace", "1s"], {
      env: { ...process.env, SNOOZE_STATE_DIR: join(dir, "state") },
    });
    cleanups.push(() => {
      for (const pid of [...descendants(run.child.pid!), run.child.pid!]) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {}
      }
    });
    const url = await run.url;
    expect((await fetch(`${url}/v1/chat/completions`, chat("qwen", { max_tokens: 1 }))).status).toBe(200);
    const engine = descendants(run.child.pid!).find((pid) => / sim /.test(commandLine(pid)));
    expect(engine, "the engine's process").toBeDefined();

    const stream = await fetch(
      `${url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 400, ignore_eos: true }),
    );
    const { rest } = await firstEventThenRest(stream);
    freeze(engine!);
    const signalled = performance.now();
    run.child.kill("SIGTERM");
    const tail = await rest;
    const streamEnded = performance.now() - signalled;
    expect(tail).toContain('"code":"shutting_down"');
    expect(tail.trim().endsWith("data: [DONE]")).toBe(true);
    expect(streamEnded).toBeGreaterThanOrEqual(900);
    expect(streamEnded).toBeLessThan(3_000);
    const code = await Promise.race([
      run.exited,
      new Promise((resolve) => setTimeout(() => resolve("hung"), 25_000)),
    ]);
    const exited = performance.now() - signalled;
    expect(code, run.stderr()).not.toBe("hung");
    // The engine is gone too (the platform's SIGKILL after its stop grace reaches a stopped process).
    await until(() => !descendants(run.child.pid!).length, 5_000, "no engine left").catch(() => {});
    console.log(
      `snooze serve exited ${Math.round(exited)} ms after SIGTERM (grace 1 s, engine frozen), code ${code}`,
    );
  }, 40_000);
});
