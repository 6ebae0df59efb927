import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, createServer as createNetServer, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { EngineLog } from "../../activator/admin.ts";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { createLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";

/**
 * The client commands as real processes (`node bin/snooze.js wake|sleep|stop|logs|status`) against
 * a Snooze running in this process, whose log lines are kept to check that tier changes are logged
 * at info.
 */
let snooze: LocalSnooze;
const logLines: Record<string, unknown>[] = [];
const children: ChildProcess[] = [];

beforeAll(async () => {
  const config = parseConfig(
    `
models:
  qwen:
    aliases: [qwen3]
    sleepAfter: 5m
    command: ${simCommand(["--enable-sleep-mode"])}
`,
    "test.yaml",
  );
  const log = createLogger({}, (line) => void logLines.push(JSON.parse(line)), "info");
  snooze = await startLocalSnooze({ config, log, host: "127.0.0.1", port: 0, statsIntervalMs: 200 });
});
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await snooze.close(1_000);
});

/** Starts `snooze <args>`; `env` adds to (or, with undefined values, removes from) the environment. */
function start(args: string[], env: Record<string, string | undefined> = {}) {
  const merged: Record<string, string | undefined> = { ...process.env, SNOOZE_URL: snooze.url, ...env };
  for (const [key, value] of Object.entries(merged)) if (value === undefined) delete merged[key];
  const child = spawn(process.execPath, ["bin/snooze.js", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: merged as NodeJS.ProcessEnv,
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const code = new Promise<number | null>((resolve) => child.once("close", resolve));
  return { child, code, stdout: () => stdout, stderr: () => stderr };
}

/** A Snooze of its own for one test, on these settings, logging only errors (nowhere). */
function anotherSnooze(yaml: string): Promise<LocalSnooze> {
  return startLocalSnooze({
    config: parseConfig(yaml, "test.yaml"),
    log: createLogger({}, () => {}, "error"),
    host: "127.0.0.1",
    port: 0,
  });
}

async function run(args: string[], env: Record<string, string | undefined> = {}) {
  const started = start(args, env);
  const code = await started.code;
  return { code, stdout: started.stdout(), stderr: started.stderr() };
}

const tierOf = () => snooze.activator.routes.get("qwen")!.tier;
const tierLogs = () =>
  logLines
    .filter((l) => l.msg === "tier" && l.model === "qwen")
    .map((l) => `${l.level} ${String(l.from)}→${String(l.to)}`);

/** The admin API's view of a cold model `qwen`, as a fake Snooze answers it. */
const coldQwen = () => ({
  id: "qwen",
  aliases: [],
  tier: "cold",
  since: new Date().toISOString(),
  held: 0,
  inFlight: 0,
});
describe("snooze wake, sleep, stop, logs and status", () => {
  test("wake follows a cold start until ready, by an alias, at the address in SNOOZE_URL", async () => {
    const wake = await run(["wake", "qwen3"]);
    expect(wake.stderr).toBe("");
    expect(wake.code).toBe(0);
    const lines = wake.stdout.trim().split("\n");
    expect(lines[0]).toBe("qwen: cold → ready");
    expect(lines).toContainEqual(expect.stringMatching(/^qwen: starting \(qwen-\d+\)$/));
    expect(lines.at(-1)).toMatch(/^qwen: ready after \d+(\.\d+)?m?s \(qwen-\d+\)$/);
    expect(tierOf()).toBe("ready");
    // Already ready: says so at once.
    expect((await run(["wake", "qwen"])).stdout).toBe("qwen: ready\n");
  });

  test("status shows the NEXT column; --url wins over SNOOZE_URL", async () => {
    const status = await run(["status", "--url", snooze.url], { SNOOZE_URL: "http://127.0.0.1:1" });
    expect(status.code).toBe(0);
    const [header, row] = status.stdout.trim().split("\n");
    expect(header).toMatch(/^MODEL\s+TIER\s+FOR\s+NEXT\s+HELD/);
    expect(row).toMatch(/^qwen\s+ready\s+\S+\s+sleeps in (4m\d+s|5m)\s+0\s+0/);
  });

  test("status --json prints the admin API's answer as it is: the models and the slots", async () => {
    // Found by an outside tester: it printed the models alone, though --help says the admin API's JSON.
    const status = await run(["status", "--json"]);
    expect(status.code).toBe(0);
    const answer = JSON.parse(status.stdout);
    const direct = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as object;
    expect(Object.keys(answer).sort()).toEqual(Object.keys(direct).sort());
    expect(answer.models.map((m: { id: string }) => m.id)).toEqual(["qwen"]);
    expect(answer.slots).toEqual([]);
  });

  test("logs prints the engine's output; -f follows it; sleep answers once asleep", async () => {
    const logs = await run(["logs", "qwen"]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/"msg":"listening"/);

    const follower = start(["logs", "qwen", "-f", "-n", "1"]);
    await until(() => follower.stdout().length > 0, 10_000, "the first lines of logs -f");
    const sleep = await run(["sleep", "qwen"]);
    expect(sleep.code).toBe(0);
    expect(sleep.stdout).toMatch(/^qwen: asleep-1 after \d+(\.\d+)?m?s\n$/);
    expect(tierOf()).toBe("asleep-1");
    // The engine's own line about falling asleep reaches the follower within about a second.
    await until(() => /"msg":"asleep"/.test(follower.stdout()), 10_000, "logs -f to show the sleep");
    follower.child.kill("SIGINT");
    expect(await follower.code).toBe(0);
  });

  test("logs -f follows a model whose id has a comma (and other characters an id may have)", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: `logs "a,b" -f` asked `after=a,b-2:4`, which the server read as
    // two engines, `a` and `b-2:4`, and refused. An id is anything but whitespace.
    const ids = ["a,b", "x:1%2C&y=#z"];
    const odd = await anotherSnooze(
      `models:\n${ids.map((id) => `  ${JSON.stringify(id)}:\n    sleepAfter: 5m\n    command: ${simCommand(["--enable-sleep-mode"])}\n`).join("")}`,
    );
    try {
      const env = { SNOOZE_URL: odd.url };
      for (const id of ids) {
        expect((await run(["wake", id], env)).code).toBe(0);
        const follower = start(["logs", id, "-f", "-n", "1"], env);
        await until(() => follower.stdout().length > 0, 10_000, "the first line of logs -f");
        expect((await run(["sleep", id], env)).code).toBe(0);
        // The engine's line about falling asleep reaches the follower: its next asks were taken.
        const asleep = () => /"msg":"asleep"/.test(follower.stdout());
        await until(() => asleep() || follower.child.exitCode !== null, 10_000, `logs -f of ${id}`);
        follower.child.kill("SIGINT");
        expect({ id, code: await follower.code, stderr: follower.stderr(), asleep: asleep() }).toEqual({
          id,
          code: 0,
          stderr: "",
          asleep: true,
        });
      }
    } finally {
      await odd.close(1_000);
    }
  });

  test("--no-wait returns at once; stop answers once the engine is gone", async () => {
    const wake = await run(["wake", "qwen", "--no-wait"]);
    expect(wake.stdout).toBe("qwen: wake requested (now asleep-1)\n");
    await until(() => tierOf() === "ready", 10_000, "ready");
    const stop = await run(["stop", "qwen"]);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toMatch(/^qwen: cold after /);
    expect(snooze.platform.replicaSet("qwen")?.replicas).toEqual([]);
    // Every tier change was logged at info, the stop's included.
    expect(tierLogs()).toEqual([
      "info cold→starting",
      "info starting→ready",
      "info ready→draining",
      "info draining→asleep-1",
      "info asleep-1→waking",
      "info waking→ready",
      "info ready→draining",
      "info draining→cold",
    ]);
  });

  test("mistakes: an unknown model exits 2 naming the known ones; no server exits 1 saying where it looked", async () => {
    const [unknown, missing, nobody] = await Promise.all([
      run(["sleep", "gpt-9"]),
      run(["wake"]),
      run(["status"], { SNOOZE_URL: "http://127.0.0.1:1" }),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("snooze sleep: no model named gpt-9; this Snooze serves qwen");
    // A name near an id or alias (names are exact, as in a request's body) is answered with it.
    const near = await run(["wake", "QWEN-3"]);
    expect(near.code).toBe(2);
    expect(near.stderr).toContain(
      "snooze wake: no model named QWEN-3; did you mean qwen3?; this Snooze serves qwen",
    );
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("name the model");
    // `snooze stop "$MODEL"` with MODEL unset: said as such, not as a model no one named.
    const empty = await run(["stop", ""], { SNOOZE_URL: "http://127.0.0.1:1" });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain(
      "snooze stop: the model's name is empty: name the model, e.g. `snooze stop qwen`",
    );
    expect(nobody.code).toBe(1);
    expect(nobody.stderr).toContain("snooze status: cannot reach http://127.0.0.1:1");
    // Mistyped flags are usage mistakes too, with or without --watch.
    const [notUrl, interval] = await Promise.all([
      run(["status", "--url", "notaurl"]),
      run(["status", "--interval", "banana"]),
    ]);
    expect(notUrl.code).toBe(2);
    expect(notUrl.stderr).toContain(
      '--url must be an http:// or https:// URL, such as http://127.0.0.1:8080; got "notaurl"',
    );
    expect(interval.code).toBe(2);
    expect(interval.stderr).toContain(
      '--interval must be a duration like 250ms, 30s, 5m or 1h30m, not "banana"',
    );
  });

  /**
   * A stand-in Snooze for `snooze wake`: it lists the model cold, opens the event stream, takes the
   * wake, and then does `afterWake` (with the event stream and every socket it has).
   */
  async function fakeSnooze(afterWake: (stream: ServerResponse, sockets: Set<Socket>) => void) {
    const sockets = new Set<Socket>();
    let stream: ServerResponse | undefined;
    const server = createHttpServer((req, res) => {
      if (req.url === "/snooze/v1/models") {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            models: [coldQwen()],
          }),
        );
      } else if (req.url?.startsWith("/snooze/v1/events/stream")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`event: hello\ndata: {}\n\n`);
        stream = res;
      } else {
        res.writeHead(202, { "content-type": "application/json" });
        res.end(JSON.stringify({ model: "qwen", action: "wake", tier: "starting" }));
        afterWake(stream!, sockets);
      }
    });
    server.on("connection", (socket) => sockets.add(socket));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  }

  test("snooze wake whose Snooze goes away mid-wait: exit 1 saying the connection was lost, no stack trace", {
    timeout: 20_000,
  }, async () => {
    // It dies after taking the wake (a killed Snooze): its sockets end under the waiting client.
    const { server, url } = await fakeSnooze((_stream, sockets) =>
      setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, 200),
    );
    try {
      const wake = await run(["wake", "qwen"], { SNOOZE_URL: url });
      expect(wake.code).toBe(1);
      expect(wake.stderr).toMatch(
        new RegExp(`^snooze wake: lost the connection to ${url}: .+ \\(did Snooze stop\\?\\)`),
      );
      expect(wake.stderr).not.toContain("    at ");
    } finally {
      server.close();
    }
  });

  test("snooze wake whose start a person's stop ends: it says so and exits 1, not waiting out --timeout", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: the wake waited silently until its --timeout.
    const slow = await anotherSnooze(
      `models:\n  slow:\n    command: ${simCommand(["--load-time", "20s"], 1)}\n`,
    );
    try {
      const env = { SNOOZE_URL: slow.url };
      const waiting = start(["wake", "slow"], env);
      await until(() => /slow: starting/.test(waiting.stdout()), 10_000, "the start");
      expect((await run(["stop", "slow"], env)).code).toBe(0);
      expect(await waiting.code).toBe(1);
      expect(waiting.stderr()).toMatch(/^slow: the wake ended after .+: the model is cold again/m);
    } finally {
      await slow.close(1_000);
    }
  });

  test("snooze wake whose model a reload removes (or renames) during its start: it says so and exits 1, not waiting out --timeout", {
    timeout: 30_000,
  }, async () => {
    // Found by a probe: the removal's cold event found the model gone from the list, which was read
    // as "not parked", and the wake waited silently until its --timeout (10 minutes by default).
    const yaml = (id: string) => `models:\n  ${id}:\n    command: ${simCommand(["--load-time", "20s"], 1)}\n`;
    const slow = await anotherSnooze(yaml("slow"));
    try {
      const waiting = start(["wake", "slow"], { SNOOZE_URL: slow.url });
      await until(() => /slow: starting/.test(waiting.stdout()), 10_000, "the start");
      expect(slow.models!.apply(parseConfig(yaml("renamed"), "test.yaml")).result).toBe("applied");
      expect(await waiting.code).toBe(1);
      expect(waiting.stderr()).toMatch(
        /^slow: the wake ended after .+: the model is no longer in Snooze's settings \(a reload removed or renamed it\)/m,
      );
    } finally {
      await slow.close(1_000);
    }
  });

  test("snooze sleep during a start no request waits for: says it waits for the load, skips the warm-up, and a snooze wake following it ends saying the model sleeps", {
    timeout: 40_000,
  }, async () => {
    // Found by an outside tester: the sleep waited silently for the start's warm-up (a minute with
    // a slow first inference), and only then put the engine to sleep.
    const slow = await anotherSnooze(
      `models:\n  slow:\n    command: ${simCommand(["--enable-sleep-mode", "--load-time", "3s", "--ttft", "30s"], 1)}\n`,
    );
    try {
      const env = { SNOOZE_URL: slow.url };
      const waiting = start(["wake", "slow"], env);
      await until(() => /slow: starting/.test(waiting.stdout()), 10_000, "the start");
      const asked = performance.now();
      const sleep = await run(["sleep", "slow"], env);
      expect(sleep.code, sleep.stderr).toBe(0);
      expect(sleep.stdout).toContain(
        "slow: its engine is still loading; it sleeps once loaded (its warm-up is skipped)\n",
      );
      expect(sleep.stdout).toMatch(/^slow: asleep-1 after \S+\n$/m);
      // The load (3 s) and the sleep, not the 30 s warm-up.
      expect(performance.now() - asked).toBeLessThan(15_000);
      expect(await waiting.code).toBe(1);
      expect(waiting.stderr()).toMatch(/^slow: the wake ended after .+: the model is asleep \(asleep-1\)/m);
    } finally {
      await slow.close(1_000);
    }
  });

  test("snooze wake of a cold slot member while another is resident follows the swap: ready, exit 0", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: the swap's announcement (the target still cold, no request held)
    // read as a person's stop, and the wake exited 1 while the swap went on.
    const member = simCommand(["--enable-sleep-mode", "--load-time", "1s", "--wake-time-l1", "500ms"], 1);
    const slot = await anotherSnooze(`
slots:
  gpu0: { policy: fifo, minResidency: 0s, swapCooldown: 0s, maxWait: 5s, drainTimeout: 10s }
models:
  ma: { slot: gpu0, sleepAfter: 5m, command: ${member} }
  mb: { slot: gpu0, sleepAfter: 5m, command: ${member} }
`);
    try {
      const env = { SNOOZE_URL: slot.url };
      expect((await run(["wake", "ma"], env)).code).toBe(0);
      const wake = await run(["wake", "mb"], env);
      expect(wake.stderr).toBe("");
      expect(wake.code).toBe(0);
      expect(wake.stdout).toMatch(/^mb: ready after .+ \(mb-\d+\)$/m);
      expect(slot.activator.routes.get("ma")!.tier).toBe("asleep-1");
    } finally {
      await slot.close(1_000);
    }
  });

  test("snooze wake --timeout of a slot member whose slot a busy resident keeps: the failure says it waited for its slot, and for whom", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: it said only `not ready after 3s (still cold)`, nothing of the slot.
    const member = simCommand(["--enable-sleep-mode", "--itl", "200ms"], 1);
    const slot = await anotherSnooze(`
slots:
  gpu0: { policy: sticky, maxWait: 2m }
models:
  ma: { slot: gpu0, command: ${member} }
  mb: { slot: gpu0, command: ${member} }
`);
    const busy = new AbortController();
    try {
      const env = { SNOOZE_URL: slot.url };
      expect((await run(["wake", "ma"], env)).code).toBe(0);
      // A stream of a minute: the resident stays busy for the whole wait.
      const stream = await fetch(`${slot.url}/v1/chat/completions`, {
        ...chat("ma", { stream: true, max_tokens: 300, ignore_eos: true }),
        signal: busy.signal,
      });
      expect(stream.status).toBe(200);
      const wake = await run(["wake", "mb", "--timeout", "2s"], env);
      expect(wake.code).toBe(1);
      expect(wake.stderr).toMatch(
        /^mb: not ready after 2s \(still cold\): it waited for its slot, as the slot `gpu0`'s resident `ma` \(ready\) keeps it until the slot's policy hands it over .*; see `snooze status`$/m,
      );
      expect(slot.activator.routes.get("ma")!.tier).toBe("ready");
    } finally {
      busy.abort();
      await slot.close(1_000);
    }
  });

  test("snooze wake whose activation fails: the failure on stderr, exit 1", { timeout: 20_000 }, async () => {
    // Found by an outside tester: the failure went to stdout. It reports the activation failed.
    const failed = { model: "qwen", replica: "qwen-1", tier: "cold", since: Date.now(), error: "boom" };
    const { server, url } = await fakeSnooze((stream) =>
      setTimeout(() => stream.end(`event: tier\ndata: ${JSON.stringify(failed)}\n\n`), 100),
    );
    try {
      const wake = await run(["wake", "qwen"], { SNOOZE_URL: url });
      expect(wake.code).toBe(1);
      expect(wake.stderr).toMatch(/^qwen: the activation failed after .+: boom$/m);
      expect(wake.stdout).not.toContain("failed");
    } finally {
      server.close();
    }
  });

  test("snooze wake during a back-off after failed starts says so, with the reason and the time left, then tries", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: the wait was silent. An engine that exits at once fails each start.
    const broken = await anotherSnooze(
      `models:\n  broken:\n    command: ["\${SNOOZE}", "sim", "--port", "\${PORT}", "--no-such-flag"]\n`,
    );
    try {
      const env = { SNOOZE_URL: broken.url };
      // Three failures: the back-off is 2 s after the third (0 after the first, 1 s after the second).
      for (let i = 0; i < 3; i++) {
        const failed = await run(["wake", "broken"], env);
        expect(failed.code).toBe(1);
        if (i < 2)
          await until(
            () => broken.activator.routes.get("broken")!.backoff() === undefined,
            5_000,
            "the back-off over",
          );
      }
      const wake = await run(["wake", "broken"], env);
      expect(wake.stdout).toMatch(
        /^broken: waiting out a back-off after a failed activation \(start of broken failed: .*exit.*\); the next try in \d+(\.\d+)?m?s$/m,
      );
      // Then it tried, and said how that went.
      expect(wake.code).toBe(1);
      expect(wake.stderr).toMatch(/^broken: the activation failed after .+/m);
      // A person's stop during the next back-off ends that wake: the waiting command hears it.
      const waiting = start(["wake", "broken"], env);
      await until(() => waiting.stdout().includes("waiting out a back-off"), 5_000, "the back-off line");
      expect((await run(["stop", "broken"], env)).code).toBe(0);
      expect(await waiting.code).toBe(1);
      expect(waiting.stderr()).toMatch(/^broken: the wake ended after .+: the model is cold again/m);
      // The stop ended the back-off too, as the admin API shows: the next wake tries at once.
      const next = await run(["wake", "broken"], env);
      expect(next.stdout).not.toContain("waiting out a back-off");
      expect(next.stderr).toMatch(/^broken: the activation failed after \d+(\.\d+)?ms: /m);
    } finally {
      await broken.close(1_000);
    }
  });

  test("a server that takes the connection and never answers: exit 1 with a line saying so, no stack trace", {
    timeout: 20_000,
  }, async () => {
    const silent = createNetServer(() => {}); // accepts, reads nothing, answers nothing
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const [status, sleep] = await Promise.all([
        run(["status"], { SNOOZE_URL: url }),
        run(["sleep", "qwen"], { SNOOZE_URL: url }),
      ]);
      for (const [name, result] of [
        ["status", status],
        ["sleep", sleep],
      ] as const) {
        expect(result.code).toBe(1);
        expect(result.stderr).toMatch(
          new RegExp(`^snooze ${name}: ${url}/snooze/v1/\\S+ did not answer in time`),
        );
        expect(result.stderr).not.toContain("    at ");
      }
    } finally {
      silent.close();
    }
  });

  test("a server at --url that does not answer as Snooze does: every client command exits 1 saying so, no stack trace", {
    timeout: 30_000,
  }, async () => {
    // Found by an outside tester: a 200 HTML page or a 200 `{}` crashed them with a SyntaxError or
    // a TypeError. Each answer below is wrong in its own way, on the route a command reads.
    const cold = coldQwen();
    const answers: Record<string, string> = {
      html: "<!doctype html><title>Welcome to nginx!</title>",
      empty: "{}",
      // Snooze's model list, but the actions and logs answer `{}` and the events are not JSON.
      actions: JSON.stringify({ models: [cold] }),
      "models-null": JSON.stringify({ models: [null] }),
    };
    let answer = "";
    const server = createHttpServer((req, res) => {
      if (req.url?.startsWith("/snooze/v1/events/stream")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end("event: hello\ndata: {}\n\nevent: tier\ndata: <b>ready</b>\n\n");
      } else if (req.url === "/snooze/v1/models" || answer !== answers.actions) {
        res.writeHead(200, { "content-type": answer.startsWith("<") ? "text/html" : "application/json" });
        res.end(answer);
      } else {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(req.url?.includes("/logs") ? JSON.stringify({ replicas: [{ replica: "q" }] }) : "{}");
      }
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const commands = [
        ["status"],
        ["status", "--json"],
        ["wake", "qwen"],
        ["wake", "qwen", "--no-wait"],
        ["sleep", "qwen"],
        ["stop", "qwen"],
        ["logs", "qwen"],
      ];
      for (const [kind, body] of Object.entries(answers)) {
        answer = body;
        for (const args of commands) {
          if (kind === "actions" && args[0] === "status") continue; // a right answer
          const result = await run(args, { SNOOZE_URL: url });
          const seen = { kind, args: args.join(" "), code: result.code, stderr: result.stderr };
          expect(seen).toEqual({
            ...seen,
            code: 1,
            stderr: expect.stringMatching(
              new RegExp(`^snooze ${args[0]}: ${url}/snooze/v1/\\S+ did not answer as Snooze does: .+\n$`),
            ),
          });
        }
      }
    } finally {
      server.close();
    }
  });

  test("logs of a running engine end with the line it is still writing: a progress bar's current state, a prompt (found by an outside tester)", async () => {
    // Before: a progress bar at 40% showed 10%, its update before (the one a carriage return had
    // ended), and a prompt without a line end did not show at all while the engine waited on it.
    const script = [
      "echo 'INFO loading'",
      "printf 'Loading shards:  10%%\\rLoading shards:  40%%' >&2",
      "sleep 0.3",
      "printf 'Token: '",
      "exec sleep 60",
    ].join("; ");
    const other = await anotherSnooze(`
models:
  m:
    command: ${JSON.stringify(["sh", "-c", script, "${PORT}"])}
`);
    const held = new AbortController();
    try {
      void fetch(`${other.url}/v1/chat/completions`, { ...chat("m"), signal: held.signal }).catch(() => {});
      const logsOf = async () =>
        ((await (await fetch(`${other.url}/snooze/v1/models/m/logs`)).json()) as { replicas: EngineLog[] })
          .replicas;
      await until(async () => (await logsOf())[0]?.unfinished?.length === 2, 10_000, "both unfinished lines");
      expect((await logsOf())[0]).toMatchObject({
        lines: ["INFO loading", "Loading shards:  10%"],
        total: 2,
        unfinished: ["Loading shards:  40%", "Token: "],
      });
      const result = await run(["logs", "m"], { SNOOZE_URL: other.url });
      expect(result).toMatchObject({
        code: 0,
        stdout: "INFO loading\nLoading shards:  10%\nLoading shards:  40%\nToken: \n",
        stderr: "",
      });
    } finally {
      held.abort();
      await other.close(1_000);
    }
  });

  test("logs of a model whose engine printed nothing says so, exit 0 (found by an outside tester: nothing at all was printed)", async () => {
    const server = createHttpServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify(
          req.url === "/snooze/v1/models"
            ? { models: [coldQwen()] }
            : { model: "qwen", replicas: [{ replica: "qwen-3", lines: [], total: 0, running: false }] },
        ),
      );
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const result = await run(["logs", "qwen"], {
        SNOOZE_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      });
      expect(result).toMatchObject({
        code: 0,
        stdout: "",
        stderr: "snooze logs: qwen has no engine output yet: qwen-3 (exited) printed nothing\n",
      });
    } finally {
      server.close();
    }
  });

  test("status --watch redraws until interrupted", async () => {
    const watch = start(["status", "--watch", "--interval", "200ms"]);
    await until(() => watch.stdout().split("MODEL").length > 2, 10_000, "two tables");
    watch.child.kill("SIGINT");
    expect(await watch.code).toBe(0);
    expect(watch.stdout()).toMatch(/^qwen\s+cold/m);
  });

  test("status --watch and logs -f whose reader goes away (`| head -1`): exit 0, no stack trace", async () => {
    // Found by an outside tester: both threw an unhandled EPIPE and exited 1.
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    for (const args of [
      ["status", "--watch", "--interval", "200ms"],
      ["logs", "qwen", "-f"],
    ]) {
      const follow = start(args);
      await until(() => follow.stdout().length > 0, 10_000, `${args[0]} output`);
      follow.child.stdout!.destroy();
      // Something more to write: a table every 200 ms, the engine's lines as it goes to sleep.
      if (args[0] === "logs")
        expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/sleep`, { method: "POST" })).status).toBe(
          200,
        );
      expect(await follow.code).toBe(0);
      expect(follow.stderr()).not.toContain("EPIPE");
    }
  });

  test("status --watch with no Snooze there says so on stderr, keeps asking, and exits 1", async () => {
    // Found by an outside tester: it printed the failure as output and exited 0.
    const watch = start(["status", "--watch", "--interval", "200ms", "--url", "http://127.0.0.1:1"]);
    await until(() => watch.stderr().split("cannot reach").length > 2, 10_000, "two failures");
    watch.child.kill("SIGINT");
    expect(await watch.code).toBe(1);
    expect(watch.stdout()).toBe("");
  });
});

/**
 * A stand-in server that lists one cold model `qwen` (or `models`) and hands every other request
 * to `other`; it ends every connection when closed.
 */
async function misbehaving(
  other: (req: IncomingMessage, res: ServerResponse) => void,
  models: object[] = [
    { id: "qwen", aliases: [], tier: "cold", since: new Date().toISOString(), held: 0, inFlight: 0 },
  ],
) {
  const server = createHttpServer((req, res) => {
    if (req.url === "/snooze/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ models }));
    } else other(req, res);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

describe("servers that misbehave (found by an outside tester)", () => {
  test("an answer that begins and then stops: every client command exits 1 naming the URL, within seconds", {
    timeout: 40_000,
  }, async () => {
    // They hung for good: logs, logs -f, wake --no-wait, sleep, and wake's event stream.
    const { url, close } = await misbehaving((req, res) => {
      res.writeHead(200, {
        "content-type": req.url?.startsWith("/snooze/v1/events/stream")
          ? "text/event-stream"
          : "application/json",
      });
      res.flushHeaders();
      // logs -f: its first read (`-n 7`) is answered, the polls after it stall.
      if (req.url?.endsWith("/logs?lines=7")) res.end(JSON.stringify({ replicas: [] }));
    });
    try {
      const env = { SNOOZE_URL: url };
      const started = performance.now();
      const commands = [
        ["logs", "qwen"],
        ["logs", "qwen", "-f", "-n", "7"],
        ["wake", "qwen", "--no-wait"],
        ["wake", "qwen"],
        ["sleep", "qwen"],
        ["stop", "qwen"],
      ];
      const results = await Promise.all(commands.map((args) => run(args, env)));
      for (const [index, result] of results.entries()) {
        const name = commands[index]![0];
        const seen = { args: commands[index]!.join(" "), code: result.code, stderr: result.stderr };
        expect(seen).toEqual({
          ...seen,
          code: 1,
          stderr: expect.stringMatching(
            new RegExp(`^snooze ${name}: ${url}/snooze/v1/\\S+ stopped answering: .+\n$`),
          ),
        });
      }
      expect(performance.now() - started).toBeLessThan(25_000);
    } finally {
      close();
    }
  });

  test("an answer larger than Snooze sends: exit 1 saying so, not reading it all", {
    timeout: 40_000,
  }, async () => {
    // A 600 MB answer grew the CLI to about 2 GB, and the message blamed a lost connection.
    const { url, close } = await misbehaving((req, res) => {
      if (req.url?.startsWith("/snooze/v1/events/stream")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        // A hello, then one event's data line of 2 MiB, never ended.
        res.write(`event: hello\ndata: {}\n\nevent: tier\ndata: "${"x".repeat(2 * 1024 * 1024)}`);
        return;
      }
      if (req.url?.endsWith("/wake")) return void res.end(JSON.stringify({ tier: "starting" }));
      // 17 MiB of JSON, sent without a length, in 1 MiB chunks.
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"replicas":[],"tier":"cold","x":"');
      const chunk = "x".repeat(1024 * 1024);
      let left = 17;
      const more = () => {
        while (left > 0 && !res.destroyed) {
          left--;
          if (!res.write(chunk)) return void res.once("drain", more);
        }
        if (!res.destroyed) res.end('"}');
      };
      more();
    });
    try {
      const env = { SNOOZE_URL: url };
      const [logs, sleep, wake] = await Promise.all([
        run(["logs", "qwen"], env),
        run(["sleep", "qwen"], env),
        run(["wake", "qwen", "--timeout", "8s"], env),
      ]);
      for (const [name, result, limit] of [
        ["logs", logs, "16 MiB"],
        ["sleep", sleep, "16 MiB"],
        ["wake", wake, "1 MiB"],
      ] as const)
        expect({ name, code: result.code, stderr: result.stderr }).toEqual({
          name,
          code: 1,
          stderr: expect.stringMatching(
            new RegExp(
              `^snooze ${name}: ${url}/snooze/v1/\\S+ did not answer as Snooze does: .*larger than ${limit}`,
            ),
          ),
        });
    } finally {
      close();
    }
  });

  test("the server's words are printed safe: control characters made visible, long messages clipped", {
    timeout: 30_000,
  }, async () => {
    // A 404 message beginning with ESC[31m reached the terminal as it was, all 200 KB of it.
    const evil = "\x1b[31mred\x1b]0;title\x07";
    const failed = { model: "qwen", replica: `q\x1b[2J`, tier: "cold", error: `${evil}boom` };
    const { url, close } = await misbehaving((req, res) => {
      if (req.url?.startsWith("/snooze/v1/events/stream")) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write("event: hello\ndata: {}\n\n");
        setTimeout(() => res.end(`event: tier\ndata: ${JSON.stringify(failed)}\n\n`), 300);
      } else if (req.url?.endsWith("/wake")) {
        res.writeHead(202, { "content-type": "application/json" });
        res.end(JSON.stringify({ tier: "starting" }));
      } else {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `${evil}${"y".repeat(200_000)}` } }));
      }
    });
    const named = await misbehaving(() => {}, [
      { id: `m\x1b[41m`, aliases: [], tier: "cold", since: new Date().toISOString(), held: 0, inFlight: 0 },
    ]);
    try {
      const [sleep, wake, unknown, status] = await Promise.all([
        run(["sleep", "qwen"], { SNOOZE_URL: url }),
        run(["wake", "qwen"], { SNOOZE_URL: url }),
        run(["stop", "nope"], { SNOOZE_URL: named.url }),
        run(["status"], { SNOOZE_URL: named.url }),
      ]);
      expect(sleep.code).toBe(1);
      expect(sleep.stderr).toMatch(
        /^snooze sleep: \S+ answered 404: \\x1b\[31mred\\x1b\]0;title\\x07y+…y+\n$/,
      );
      expect(sleep.stderr.length).toBeLessThan(2_000);
      expect(wake.code).toBe(1);
      expect(wake.stderr).toMatch(
        /^qwen: the activation failed after .+: \\x1b\[31mred\\x1b\]0;title\\x07boom$/m,
      );
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain("this Snooze serves m\\x1b[41m");
      expect(status.stdout).toMatch(/^m\\x1b\[41m +cold/m);
      for (const result of [sleep, wake, unknown, status])
        expect([...(result.stdout + result.stderr)].filter((c) => c < " " && c !== "\n")).toEqual([]);
    } finally {
      close();
      named.close();
    }
  });

  test("logs prints an engine's escape sequences made visible on a terminal, as written in a pipe (found by an outside tester: they retitled and cleared the terminal)", {
    timeout: 30_000,
  }, async () => {
    // An engine whose output sets the terminal's title, clears it, writes its clipboard (OSC 52)
    // and colours it through the one-character CSI; its tab stays a tab.
    const printf = "printf 'INFO \\033]0;pwned\\007\\033[2J\\033]52;c;aGk=\\007\\302\\23331m\\tred\\n'";
    const sim = [
      "${SNOOZE}",
      "sim",
      "--served-model-name",
      "${MODEL}",
      "--port",
      "${PORT}",
      "--time-scale",
      "0.05",
    ];
    const command = ["sh", "-c", `${printf}; exec "$0" "$@"`, ...sim];
    const engine = await anotherSnooze(
      `models:\n  loud:\n    sleep: false\n    command: ${JSON.stringify(command)}\n`,
    );
    try {
      expect((await fetch(`${engine.url}/v1/chat/completions`, chat("loud"))).status).toBe(200);
      const shownWords = "INFO \\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;aGk=\\x07\\x9b31m\tred";
      // In a pipe (to a file, to grep) the engine's output is its output, as `kubectl logs` prints it.
      const piped = await run(["logs", "loud"], { SNOOZE_URL: engine.url });
      expect(piped.code).toBe(0);
      expect(piped.stdout.split("\n")).toContain(
        "INFO \x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x9b31m\tred",
      );
      const onTerminal = (text: string) =>
        [...text].filter((c) => (c < " " || (c >= "\x7f" && c <= "\x9f")) && !"\t\r\n".includes(c));
      // On a terminal (a pseudo-terminal `script` gives it), where the escapes would act.
      if (existsSync("/usr/bin/script")) {
        const logs = `${JSON.stringify(process.execPath)} bin/snooze.js logs loud`;
        // Not spawnSync: the Snooze it reads runs in this process.
        const tty = spawn("script", ["-qec", logs, "/dev/null"], {
          stdio: ["ignore", "pipe", "pipe"],
          env: { ...process.env, SNOOZE_URL: engine.url },
        });
        children.push(tty);
        let shown = "";
        tty.stdout!.on("data", (chunk) => (shown += chunk));
        const [code] = await once(tty, "close");
        expect(code).toBe(0);
        expect(shown.split("\r\n")).toContain(shownWords);
        expect(onTerminal(shown)).toEqual([]);
      }
    } finally {
      await engine.close(1_000);
    }
  });

  test("status --json (--watch: one document a line) and the table keep an engine's U+2028, C1 controls and bidirectional marks escaped (found by an outside tester: readline read two lines, neither JSON)", {
    timeout: 30_000,
  }, async () => {
    // An engine whose last words, its failure's reason, hold them; then it exits.
    const words = "before\u2028after \u2029para \u0085nel \u009b31mcsi \u202eevil\u202c";
    const script = `process.stdout.write(${JSON.stringify(`${words}\n`)}); process.exit(1);`;
    const broken = await anotherSnooze(
      `models:\n  broken:\n    sleep: false\n    command: ${JSON.stringify([process.execPath, "-e", script, "${PORT}"])}\n`,
    );
    const raw = /[\p{Cc}\u2028\u2029\u202a-\u202e]/u;
    try {
      expect((await fetch(`${broken.url}/v1/chat/completions`, chat("broken"))).status).toBe(503);
      const env = { SNOOZE_URL: broken.url };
      const json = await run(["status", "--json"], env);
      expect(json.code).toBe(0);
      // The server shows the engine's controls as escapes already (lib/engine-words.ts).
      const shown = "before\\u2028after \\u2029para \\x85nel \\x9b31mcsi \\u202eevil\\u202c";
      expect(JSON.parse(json.stdout).models[0].lastError).toContain(shown);
      for (const line of json.stdout.trimEnd().split("\n")) expect(line).not.toMatch(raw);
      const table = await run(["status"], env);
      expect(table.stdout).toContain(shown);
      for (const line of table.stdout.trimEnd().split("\n")) expect(line).not.toMatch(raw);
      // Each document of --watch --json is one line to Node's readline.
      const watch = start(["status", "--json", "--watch", "--interval", "200ms"], env);
      const documents: unknown[] = [];
      createInterface({ input: watch.child.stdout! }).on("line", (line) => {
        expect(line).not.toMatch(raw);
        documents.push(JSON.parse(line));
      });
      await until(() => documents.length >= 2, 10_000, "two documents");
      watch.child.kill("SIGINT");
      expect(await watch.code).toBe(0);
      expect(documents[0]).toMatchObject({
        models: [{ id: "broken", lastError: expect.stringContaining(shown) }],
      });
    } finally {
      await broken.close(1_000);
    }
  });

  test("logs -f whose reader stops reading (`| less` left unscrolled) waits for it, not asking again, and then says what it missed (found by an outside tester: 1.6 MB a second held, without end)", {
    timeout: 30_000,
  }, async () => {
    // Each answer: the lines asked for (100 first, then 500: 2 MB) of 4000 characters, as a
    // talkative engine's would be.
    let asked = 0;
    const { url, close } = await misbehaving((req, res) => {
      if (!req.url?.startsWith("/snooze/v1/models/qwen/logs")) return void res.end("{}");
      asked++;
      const total = asked * 10_000;
      const count = Number(new URL(req.url, "http://snooze").searchParams.get("lines"));
      const lines = Array.from({ length: count }, (_, i) => `${total - count + 1 + i} ${"z".repeat(4_000)}`);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ replicas: [{ replica: "qwen-1", lines, total, running: true }] }));
    });
    try {
      const follow = start(["logs", "qwen", "-f"], { SNOOZE_URL: url });
      // Nothing reads its output from here on: the pipe fills, then Node would queue the rest.
      follow.child.stdout!.pause();
      await until(() => asked >= 2, 10_000, "the first follow-up");
      // Four of its one-second rounds; asking on each, it would hold 2 MB more each time. (A window
      // of time, as the absence of a request can only be seen in one.)
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      expect(asked).toBeLessThanOrEqual(3);
      // Read again: it catches up, saying what the server no longer kept.
      follow.child.stdout!.resume();
      await until(() => / … \d+ lines not kept\n/.test(follow.stdout()), 10_000, "the lines not kept");
      follow.child.kill("SIGINT");
      expect(await follow.code).toBe(0);
    } finally {
      close();
    }
  });

  test("snooze wake whose event stream is not Snooze's: exit 1 naming the URL, at once", {
    timeout: 30_000,
  }, async () => {
    // An HTML page said only "the event stream closed before it began"; JSON was read until --timeout.
    let type = "text/html";
    const { url, close } = await misbehaving((req, res) => {
      if (!req.url?.startsWith("/snooze/v1/events/stream")) return void res.end("{}");
      res.writeHead(200, { "content-type": type });
      if (type === "text/html") res.end("<html>nope</html>");
      else if (type === "text/event-stream")
        res.end("retry: 2000\n\n"); // no hello
      else res.write('{"models":[]}'); // and never ends
    });
    try {
      for (const [kind, problem] of [
        ["text/html", "text/html"],
        ["application/json", "application/json"],
        ["text/event-stream", "ended before"],
      ] as const) {
        type = kind;
        const started = performance.now();
        const wake = await run(["wake", "qwen", "--timeout", "20s"], { SNOOZE_URL: url });
        expect({ kind, code: wake.code, stderr: wake.stderr }).toEqual({
          kind,
          code: 1,
          stderr: expect.stringMatching(
            new RegExp(
              `^snooze wake: ${url}/snooze/v1/events/stream\\S* did not answer as Snooze does: .*${problem}.*\n$`,
            ),
          ),
        });
        expect(performance.now() - started).toBeLessThan(10_000);
      }
    } finally {
      close();
    }
  });

  test("an https:// address whose server speaks plain HTTP: exit 1 saying to write http://, not OpenSSL's words", async () => {
    const { url, close } = await misbehaving((_req, res) => res.end("{}"));
    try {
      for (const args of [["status"], ["sleep", "qwen"]]) {
        const result = await run(args, { SNOOZE_URL: url.replace("http:", "https:") });
        expect(result.code).toBe(1);
        expect(result.stderr).toBe(
          `snooze ${args[0]}: cannot reach ${url.replace("http:", "https:")}: the server there does not speak TLS (https://); Snooze serves plain HTTP unless a proxy before it adds TLS: write http://\n`,
        );
      }
    } finally {
      close();
    }
  });

  test("logs -n that is not a whole number says so", async () => {
    const logs = await run(["logs", "qwen", "-n", "1.5"]);
    expect(logs.code).toBe(2);
    expect(logs.stderr).toContain("--lines must be a whole number of at least 1");
    // Found by an outside tester: hex, an exponent and spaces were taken (as `--port` once took
    // them), and a count past 2^53 went out as `lines=1e+22`, which the server refused with a 400.
    for (const count of ["0x10", "1e3", " 5", "0"]) {
      const refused = await run(["logs", "qwen", "-n", count]);
      expect({ count, code: refused.code }).toEqual({ count, code: 2 });
      expect(refused.stderr).toContain(`--lines must be a whole number of at least 1, not "${count}"`);
    }
    const huge = await run(["logs", "qwen", "-n", "9999999999999999999999"]);
    expect(huge.stderr).not.toContain("answered 400");
    expect(huge.code).toBe(0);
  });
});

test("a request still works after the commands (nothing left half-done)", async () => {
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
});
