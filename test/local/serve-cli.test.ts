import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { acceptBacklog, acceptors, acceptorsWithin } from "../../activator/listen.ts";
import { freePort } from "../../lib/free-port.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import { serveProcess } from "../helpers/serve-process.ts";

const node = process.execPath;
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

function writeConfig(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), "snooze-cli-")), "snooze.yaml");
  writeFileSync(file, text);
  return file;
}

/** Runs `snooze serve` as a real process; resolves with its URL once it logs that it listens. */
function serve(config: string) {
  const run = serveProcess(config, ["--shutdown-grace", "5s"]);
  children.push(run.child);
  return run;
}

describe("snooze serve as a process", () => {
  test("a bad settings file: exit code 2 with file, line, key and reason", async () => {
    const file = writeConfig("models:\n  qwen:\n    command: [x, '${PORT}']\n    sleepAfter: 5 minutes\n");
    const run = serve(file);
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toContain(`${file}:4:5: models.qwen.sleepAfter: expected a duration`);
  });

  test("a command written as one text: exit code 2 at its place, showing the list it meant", async () => {
    // Found by an outside tester: it was refused as "expected a list of strings" only.
    const file = writeConfig(
      "models:\n  qwen:\n    command: \"vllm serve 'my model' --port ${PORT} --enable-sleep-mode\"\n",
    );
    const run = serve(file);
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toContain(
      `${file}:3:5: models.qwen.command: expected a list of strings, not "vllm serve 'my model' --port \${PORT} --enable-sleep-mode"; write it as a list, one word an item: command: [vllm, serve, "my model", --port, "\${PORT}", --enable-sleep-mode]`,
    );
  });

  test("SIGTERM before it has started (its settings not read yet) is a graceful exit 0, not Node's 143", async () => {
    // Found by an outside tester: a SIGTERM in its first ~150 ms exited 143. The signal goes once
    // Snooze holds the early stop signals (SIGQUIT, which Node leaves alone, is then caught), while
    // it loads its modules, before it reads its settings.
    const file = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const run = serve(file);
    const caught = () => {
      try {
        const mask = /SigCgt:\s*([0-9a-f]+)/.exec(readFileSync(`/proc/${run.child.pid}/status`, "utf8"))?.[1];
        return mask !== undefined && (BigInt(`0x${mask}`) & 4n) !== 0n;
      } catch {
        return false;
      }
    };
    await until(caught, 10_000, "the early stop signals held");
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    expect(run.stderr()).toBe("");
  });

  test("a named pipe, a device or a huge file as the settings file: exit code 2 at once, saying what it is", async () => {
    // Found by an outside tester: a named pipe hung `snooze serve` for good, deaf to SIGTERM (its
    // exit waited for the blocked read), and a 1.5 GB file crashed it with a stack trace.
    const dir = mkdtempSync(join(tmpdir(), "snooze-cli-"));
    const fifo = join(dir, "snooze.yaml");
    execFileSync("mkfifo", [fifo]);
    const piped = serve(fifo);
    const guard = setTimeout(() => void open(fifo, "w").then((w) => w.close()), 5_000);
    try {
      expect(await piped.exited).toBe(2);
    } finally {
      clearTimeout(guard);
    }
    expect(piped.stderr()).toContain(`${fifo}: (top level): it is a named pipe (FIFO), not a settings file`);
    const zero = serve("/dev/zero");
    expect(await zero.exited).toBe(2);
    expect(zero.stderr()).toContain("/dev/zero: (top level): it is a device, not a settings file");
    const big = join(dir, "model.safetensors");
    writeFileSync(big, "");
    truncateSync(big, 1500 * 1024 * 1024);
    const huge = serve(big);
    expect(await huge.exited).toBe(2);
    expect(huge.stderr()).toContain(
      `${big}: (top level): the file is 1.5 GiB; a settings file may be at most 1 MiB`,
    );
  });

  test("a named pipe in the state directory as learning.json or as a record of engines: serve starts, says what it is, and stops at SIGTERM", async () => {
    // Found by an outside tester: either one hung `snooze serve` at start for good, silent and deaf
    // to SIGTERM (its read of the pipe blocked the process).
    const file = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const stateDir = mkdtempSync(join(tmpdir(), "snooze-cli-"));
    const pipes = [join(stateDir, "learning.json"), join(stateDir, "serve-1.json")];
    for (const pipe of pipes) execFileSync("mkfifo", [pipe]);
    const run = serveProcess(file, ["--shutdown-grace", "5s", "--state-dir", stateDir]);
    children.push(run.child);
    // A writer that comes and goes unblocks a reader stuck on a pipe, so a hang fails the test.
    const guard = setTimeout(() => {
      for (const pipe of pipes) void open(pipe, "w").then((w) => w.close());
    }, 15_000);
    try {
      await run.url;
    } finally {
      clearTimeout(guard);
    }
    expect(run.stderr()).toContain("cannot read the learning history");
    expect(run.stderr()).toContain("ignoring an unreadable record of engines");
    expect(run.stderr().match(/it is a named pipe \(FIFO\), not a regular file/g)).toHaveLength(2);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("a state directory that cannot be written: exit code 2 at start, not a warning at the shutdown", async () => {
    // Found by an outside tester: `--state-dir /proc/x` started and warned only when it stopped.
    const file = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const refused = serveProcess(file, ["--state-dir", "/proc/x"]);
    children.push(refused.child);
    expect(await refused.exited).toBe(2);
    expect(refused.stderr()).toContain(
      "snooze serve: --state-dir /proc/x cannot be used, as files cannot be written there: ENOENT",
    );
  });

  test('an empty --state-dir (`--state-dir "$DIR"` with DIR unset): exit code 2, nothing written where it runs', async () => {
    // Found by an outside tester: it was taken as the working directory, which got learning.json.
    const file = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const cwd = mkdtempSync(join(tmpdir(), "snooze-cli-"));
    const run = serveProcess(file, ["--state-dir", ""], {
      command: [process.execPath, join(process.cwd(), "bin/snooze.js")],
      cwd,
    });
    children.push(run.child);
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toContain("snooze serve: --state-dir is empty: name a directory");
    expect(readdirSync(cwd)).toEqual([]);
  });

  test("--host [::1] (an IPv6 address as a URL writes it) listens on ::1; an empty --host or --config exits 2", async () => {
    // Found by an outside tester: `--host [::1]` passed the loopback check, then the listen looked
    // the bracketed name up (`cannot listen on [[::1]]:8080: getaddrinfo ENOTFOUND [::1]`, exit 1);
    // `--host ""` listened on every interface and logged `http://:8080`; `--config ""` was
    // `: (top level): cannot read the file: ENOENT ... stat ''`.
    const file = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const run = serveProcess(file, ["--host", "[::1]"]);
    children.push(run.child);
    const url = await run.url;
    expect(url).toMatch(/^http:\/\/\[::1\]:\d+$/);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    for (const [args, said] of [
      [
        ["--host", ""],
        'snooze serve: --host is empty: name the address to listen on (127.0.0.1; 0.0.0.0 or "::" for every interface)',
      ],
      [
        ["--host", "[localhost]"],
        "snooze serve: --host [localhost]: only an IPv6 address is written in brackets (as in a URL), not localhost",
      ],
      [
        ["--config", ""],
        "snooze serve: --config is empty: name the settings file, or leave the flag out for snooze.yaml",
      ],
    ] as const) {
      const refused = serveProcess(file, [...args]);
      children.push(refused.child);
      expect(await refused.exited).toBe(2);
      expect(refused.stderr()).toContain(said);
    }
  });

  test("a missing settings file: exit code 2 naming it", async () => {
    const run = serve("/nonexistent/snooze.yaml");
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toContain("/nonexistent/snooze.yaml: (top level): cannot read the file");
  });

  test("no --config where there is no snooze.yaml: exit code 2 saying where it looked and what to pass", async () => {
    // Found by a probe: `npx snooze serve` outside the checkout said only `snooze.yaml: (top level):
    // cannot read the file: ENOENT: no such file or directory, stat 'snooze.yaml'`, not where it
    // looked nor that --config names another file.
    const cwd = mkdtempSync(join(tmpdir(), "snooze-cli-"));
    const child = spawn(node, [join(process.cwd(), "bin/snooze.js"), "serve", "--port", "0"], {
      cwd,
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(child);
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk;
    });
    const [code] = await once(child, "close");
    expect(code).toBe(2);
    expect(stderr).toBe(
      `snooze serve: no settings file: there is no snooze.yaml in ${cwd}, where snooze serve looks for one when --config does not name it; pass --config <file> (-c), or run it in the directory that holds snooze.yaml\n`,
    );
    // A relative --config that names no file: said from where it was looked for.
    const given = spawn(node, [join(process.cwd(), "bin/snooze.js"), "serve", "-c", "conf/snooze.yaml"], {
      cwd,
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(given);
    let said = "";
    given.stderr!.on("data", (chunk: Buffer) => {
      said += chunk;
    });
    const [givenCode] = await once(given, "close");
    expect(givenCode).toBe(2);
    expect(said).toContain(
      `conf/snooze.yaml: (top level): cannot read the file: there is no such file (a relative path is read from ${cwd}, the directory snooze serve runs in)`,
    );
  });

  test("a model whose fixed port is serve's own: exit code 2 naming it; a reload that brings it is refused", async () => {
    // Found by an outside tester: it started, and the model's every start failed.
    const port = await freePort("127.0.0.1");
    const command = simCommand([], 1);
    const refused = serveProcess(writeConfig(`models:\n  m:\n    command: ${command}\n    port: ${port}\n`), [
      "--port",
      String(port),
    ]);
    children.push(refused.child);
    expect(await refused.exited).toBe(2);
    expect(refused.stderr()).toMatch(
      new RegExp(`snooze\\.yaml:4:5: models\\.m\\.port: port ${port} is the port Snooze itself listens on`),
    );
    // Running: a reload that gives its port to a model changes nothing, and says why.
    const file = writeConfig(`models:\n  m:\n    command: ${command}\n`);
    const run = serveProcess(file, ["--port", String(port)]);
    children.push(run.child);
    const url = await run.url;
    writeFileSync(file, `models:\n  m:\n    command: ${command}\n    port: ${port}\n`);
    run.child.kill("SIGHUP");
    await until(() => run.stderr().includes("the settings file is not valid"), 10_000, "the refused reload");
    expect(run.stderr()).toContain(`models.m.port: port ${port} is the port Snooze itself listens on`);
    expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
  });

  test("a port in use: exit code 1 saying so", async () => {
    const blocker = createServer();
    blocker.listen(0, "127.0.0.1");
    await once(blocker, "listening");
    try {
      const port = (blocker.address() as AddressInfo).port;
      const child = spawn(
        node,
        ["bin/snooze.js", "serve", "--config", "snooze.yaml", "--port", String(port)],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      children.push(child);
      let stderr = "";
      child.stderr!.on("data", (chunk) => (stderr += chunk));
      const [code] = await once(child, "close");
      expect(code).toBe(1);
      expect(stderr).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use`);
    } finally {
      blocker.close();
    }
  });

  test("listens on several sockets, each with an accept queue deeper than Node's 511, so a burst of new connections is neither dropped nor left waiting", async () => {
    const run = serve(writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`));
    const { port } = new URL(await run.url);
    // For a listening socket, ss's Send-Q is the backlog it was given (capped by somaxconn).
    const lines = execFileSync("ss", ["-ltnH", `( sport = :${port} )`], { encoding: "utf8" })
      .trim()
      .split("\n");
    expect(lines).toHaveLength(acceptors);
    const somaxconn = Number(readFileSync("/proc/sys/net/core/somaxconn", "utf8"));
    for (const line of lines) {
      const backlog = Number(line.trim().split(/\s+/)[2]);
      expect(backlog).toBe(Math.min(acceptBacklog, somaxconn));
      expect(backlog).toBeGreaterThan(511);
    }
  });

  test("under a small descriptor limit (`ulimit -n 120`) it listens on an eighth of it and serves, rather than failing with EMFILE", async () => {
    // Found in review: its 128 listening sockets alone took more than the limit.
    const run = serveProcess(writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`), [], {
      command: ["sh", "-c", 'ulimit -n 120 && exec "$0" "$@"', process.execPath, "bin/snooze.js"],
    });
    children.push(run.child);
    const url = await run.url;
    const { port } = new URL(url);
    const lines = execFileSync("ss", ["-ltnH", `( sport = :${port} )`], { encoding: "utf8" })
      .trim()
      .split("\n");
    expect(lines).toHaveLength(acceptorsWithin(120));
    const answer = await fetch(`${url}/v1/chat/completions`, chat("fast"));
    expect(answer.status).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("SIGTERM: held requests get 503 + Retry-After, in-flight streams finish, engines stop", async () => {
    const file = writeConfig(`
models:
  fast:
    command: ${simCommand(["--load-time", "100ms", "--itl", "20ms"], 1)}
  slow:
    command: ${simCommand(["--load-time", "60s"], 1)}
`);
    const run = serve(file);
    const url = await run.url;
    expect((await fetch(`${url}/v1/chat/completions`, chat("fast", { max_tokens: 1 }))).status).toBe(200);
    const state = (await (await fetch(`${url}/snooze/v1/models`)).json()) as any;
    const engine = state.models.find((m: { id: string }) => m.id === "fast").replicas[0].address as string;

    const streaming = await fetch(
      `${url}/v1/chat/completions`,
      chat("fast", { stream: true, max_tokens: 40 }),
    );
    const streamed = streaming.text();
    const held = fetch(`${url}/v1/chat/completions`, chat("slow"));
    await until(
      async () => {
        const s = (await (await fetch(`${url}/snooze/v1/models`)).json()) as any;
        return s.models.find((m: { id: string }) => m.id === "slow").held === 1;
      },
      5_000,
      "the slow request to be held",
    );

    run.child.kill("SIGTERM");
    const heldResponse = await held;
    expect(heldResponse.status).toBe(503);
    // Not the 1 s a start's unknown estimate gives: this process will not serve the retry.
    expect(heldResponse.headers.get("retry-after")).toBe("5");
    const { error } = (await heldResponse.json()) as any;
    expect(error.code).toBe("shutting_down");
    expect(error.message).toContain("Retry in about 5s");
    expect((await streamed).trim().endsWith("data: [DONE]")).toBe(true);
    expect(await run.exited).toBe(0);
    await expect(fetch(`http://${engine}/health`)).rejects.toThrow();
  });

  test("during the graceful shutdown `snooze status` answers, saying Snooze shuts down; a new request gets 503 shutting_down", async () => {
    // Found by an outside tester: the port was closed at once, so `snooze status` said "cannot
    // reach … is Snooze running?" while Snooze drained its streams.
    const file = writeConfig(
      `models:\n  fast:\n    command: ${simCommand(["--load-time", "100ms", "--itl", "50ms"], 1)}\n`,
    );
    const run = serveProcess(file, ["--shutdown-grace", "30s"]);
    children.push(run.child);
    const url = await run.url;
    const streaming = await fetch(
      `${url}/v1/chat/completions`,
      chat("fast", { stream: true, max_tokens: 60 }),
    );
    const streamed = streaming.text();
    await until(
      async () => ((await (await fetch(`${url}/snooze/v1/models`)).json()) as any).models[0].inFlight === 1,
      5_000,
      "the stream",
    );
    run.child.kill("SIGTERM");
    await until(() => run.stderr().includes("shutting down"), 5_000, "the shutdown to begin");
    const status = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(node, ["bin/snooze.js", "status", "--url", url], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      child.stderr.on("data", (chunk) => (err += chunk));
      child.on("close", (code) => resolve({ code, out, err }));
    });
    expect(status.err).toBe("");
    expect(status.code).toBe(0);
    expect(status.out).toMatch(/^Snooze is shutting down: .*\n\nMODEL +TIER/);
    expect(status.out).toContain("fast");
    const refused = await fetch(`${url}/v1/chat/completions`, chat("fast"));
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as any).error.code).toBe("shutting_down");
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    // The stream in flight still finishes, and then Snooze exits.
    expect((await streamed).trim().endsWith("data: [DONE]")).toBe(true);
    expect(await run.exited).toBe(0);
  });

  test("SIGTERM with the longest graces the flags take: the stream in flight finishes (found by an outside tester: cut at once)", async () => {
    const file = writeConfig(
      `models:\n  fast:\n    command: ${simCommand(["--load-time", "100ms", "--itl", "20ms"], 1)}\n`,
    );
    const longest = "596h31m23.647s";
    const run = serveProcess(file, ["--shutdown-grace", longest, "--stop-grace", longest]);
    children.push(run.child);
    const url = await run.url;
    const streaming = await fetch(
      `${url}/v1/chat/completions`,
      chat("fast", { stream: true, max_tokens: 40 }),
    );
    const streamed = streaming.text();
    await until(
      async () => ((await (await fetch(`${url}/snooze/v1/models`)).json()) as any).models[0].inFlight === 1,
      5_000,
      "the stream",
    );
    run.child.kill("SIGTERM");
    expect((await streamed).trim().endsWith("data: [DONE]")).toBe(true);
    expect(await run.exited).toBe(0);
    expect(run.stderr()).not.toContain("overran its graces");
  });

  test("SIGTERM while a body is still trickling in past the grace: the client gets 503 shutting_down, not a cut", async () => {
    // Found by an outside tester: the answer was written but held back (Node corks a write until
    // the next tick), and the shutdown destroyed the connection first.
    const file = writeConfig(`models:\n  cold:\n    command: ${simCommand([], 1)}\n`);
    const run = serveProcess(file, ["--shutdown-grace", "1s"]);
    children.push(run.child);
    const { port } = new URL(await run.url);
    const body = JSON.stringify({ model: "cold", messages: [{ role: "user", content: "x".repeat(50_000) }] });
    const socket = connect(Number(port), "127.0.0.1");
    socket.setEncoding("latin1");
    let reply = "";
    socket.on("data", (data: string) => (reply += data));
    socket.on("error", () => {});
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 100)}`,
    );
    let sent = 100;
    const drip = setInterval(() => {
      if (socket.destroyed) return;
      socket.write(body.slice(sent, sent + 10));
      sent += 10;
    }, 200);
    await new Promise((resolve) => setTimeout(resolve, 300));
    run.child.kill("SIGTERM");
    await once(socket, "close");
    clearInterval(drip);
    expect(reply.split("\r\n")[0]).toBe("HTTP/1.1 503 Service Unavailable");
    expect(reply).toContain('"code":"shutting_down"');
    expect(await run.exited).toBe(0);
  });

  test("an admin route's refusal given before the body was read says Connection: close and closes once the body is in: every 2 MB upload gets its 403", async () => {
    // Found by an outside tester: such refusals kept the connection alive (a slow upload after one
    // stayed open past 60 s), and with Expect: 100-continue Node closed it at once, so a client
    // still uploading (node:http writes the body without waiting) was reset in 10 of 10 tries.
    const file = writeConfig(`models:\n  m:\n    command: ${simCommand([], 1)}\n`);
    const run = serve(file);
    const url = await run.url;
    const expecting = `
      const http = await import("node:http");
      const results = [];
      for (let i = 0; i < 10; i++) {
        results.push(await new Promise((resolve) => {
          const req = http.request(process.argv[1], { method: "POST", headers: {
            "content-type": "application/json", origin: "http://evil.example" } });
          req.on("response", (res) => {
            let text = ""; res.on("data", (c) => (text += c));
            res.on("end", () => resolve(res.statusCode + " " + res.headers.connection + " " + JSON.parse(text).error.code));
          });
          req.on("error", (e) => resolve("failed: " + e.code));
          req.end(Buffer.alloc(2 * 1024 * 1024, 97));
        }));
      }
      console.log(JSON.stringify(results));`;
    // A client of its own process: in this one the server would read between its writes.
    const client = spawn(node, ["--input-type=module", "-e", expecting, `${url}/snooze/v1/models/m/sleep`], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let answers = "";
    client.stdout!.on("data", (chunk) => (answers += chunk));
    await once(client, "exit");
    expect(JSON.parse(answers)).toEqual(Array(10).fill("403 close cross_origin_refused"));
  });

  test("SIGTERM with a trace collector that never answers: exit 0, not held for the exporter's timeout", async () => {
    // Found by an outside tester: the exit waited on the span export. The exporter's own timeout is
    // a minute here, so a shutdown that waited for it would run past this test's limit.
    const sockets: import("node:net").Socket[] = [];
    const collector = createServer((socket) => {
      sockets.push(socket);
      socket.on("data", () => {});
    }).listen(0, "127.0.0.1");
    await once(collector, "listening");
    try {
      const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
      const run = serveProcess(writeConfig(`models:\n  m:\n    command: ${simCommand([], 1)}\n`), [], {
        env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_TIMEOUT: "60000" },
      });
      children.push(run.child);
      const url = await run.url;
      // A span to export: the answer to a request for a model Snooze does not serve.
      expect((await fetch(`${url}/v1/chat/completions`, chat("other"))).status).toBe(404);
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const socket of sockets) socket.destroy();
      collector.close();
    }
  }, 20_000);

  test("SIGTERM with an event sink and a trace collector that both never answer: they are waited for together, about 2 s, not one after the other", async () => {
    // Found by an outside tester: the stop took 4 s, the sink's 2 s and then the collector's 2 s.
    const sockets: import("node:net").Socket[] = [];
    const silent = () =>
      createServer((socket) => {
        sockets.push(socket);
        socket.on("data", () => {});
      }).listen(0, "127.0.0.1");
    const [sink, collector] = [silent(), silent()];
    await Promise.all([once(sink, "listening"), once(collector, "listening")]);
    const portOf = (server: typeof sink) => (server.address() as AddressInfo).port;
    try {
      const run = serveProcess(
        writeConfig(
          `eventSink: http://127.0.0.1:${portOf(sink)}\nmodels:\n  m:\n    command: ${simCommand()}\n`,
        ),
        [],
        {
          env: {
            ...process.env,
            OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${portOf(collector)}`,
            OTEL_EXPORTER_OTLP_TIMEOUT: "60000",
          },
        },
      );
      children.push(run.child);
      const url = await run.url;
      // A cold start: spans to export, and CloudEvents (started, then stopped at shutdown) to send.
      expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
      const signalled = performance.now();
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
      const stopMs = performance.now() - signalled;
      expect(run.stderr()).toContain("spans still queued were not exported within 2 s");
      expect(sockets.length).toBeGreaterThanOrEqual(2);
      // Each waits up to 2 s; one after the other took 4 s.
      expect(stopMs).toBeGreaterThan(1_900);
      expect(stopMs).toBeLessThan(3_500);
    } finally {
      for (const socket of sockets) socket.destroy();
      sink.close();
      collector.close();
    }
  }, 20_000);

  test("its parent's exit stops it when npm started it, not when it was detached (nohup)", {
    timeout: 40_000,
  }, async () => {
    const config = writeConfig(`models:\n  fast:\n    command: ${simCommand([], 1)}\n`);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    /** A shell that starts Snooze in the background, no terminal, waits until it listens, then exits. */
    const detached = async (npmCommand: string | undefined) => {
      const log = join(mkdtempSync(join(tmpdir(), "snooze-parent-")), "serve.log");
      const env: NodeJS.ProcessEnv = { ...process.env, npm_command: npmCommand };
      if (npmCommand === undefined) delete env.npm_command;
      const script = `"${node}" bin/snooze.js serve --config "${config}" --port 0 </dev/null >/dev/null 2>"${log}" & pid=$!
for i in $(seq 150); do grep -q '"msg":"listening"' "${log}" && break; sleep 0.1; done
echo $pid`;
      const parent = spawn("sh", ["-c", script], { stdio: ["ignore", "pipe", "ignore"], env });
      let out = "";
      parent.stdout!.on("data", (chunk) => (out += chunk));
      await once(parent, "close");
      const pid = Number(out.trim());
      expect(pid).toBeGreaterThan(1);
      return { pid, log };
    };
    const started = await detached("run-script");
    await until(() => !alive(started.pid), 10_000, "snooze serve started by npm gone with its parent");
    expect(readFileSync(started.log, "utf8")).toContain("the parent process exited; shutting down");
    // npm killed with SIGKILL: the `sh -c` it ran the script through stays, and Snooze's parent
    // with it; npm, its grandparent, is gone (found by an outside tester: it went on serving).
    const npmLog = join(mkdtempSync(join(tmpdir(), "snooze-parent-")), "serve.log");
    const serve = `"${node}" bin/snooze.js serve --config "${config}" --port 0 </dev/null >/dev/null 2>"${npmLog}"; true`;
    const npm = spawn("sh", ["-c", `sh -c '${serve}' & wait`], {
      stdio: "ignore",
      env: { ...process.env, npm_command: "start" },
    });
    const npmLogText = () => (existsSync(npmLog) ? readFileSync(npmLog, "utf8") : "");
    await until(() => npmLogText().includes('"msg":"listening"'), 15_000, "snooze serve under npm");
    const servePid = Number(/"msg":"listening".*"pid":(\d+)/.exec(npmLogText())![1]);
    try {
      npm.kill("SIGKILL");
      await until(() => !alive(servePid), 10_000, "snooze serve gone with npm, its shell left behind");
      expect(npmLogText()).toContain("the parent process exited; shutting down");
    } finally {
      if (alive(servePid)) process.kill(servePid, "SIGTERM");
    }
    const nohup = await detached(undefined);
    try {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(alive(nohup.pid)).toBe(true);
    } finally {
      process.kill(nohup.pid, "SIGTERM");
      await until(() => !alive(nohup.pid), 15_000, "the detached snooze serve gone after SIGTERM");
    }
  });
});
