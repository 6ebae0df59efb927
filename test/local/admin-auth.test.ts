import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";

/**
 * The admin API and the events endpoint over real sockets: cross-origin browser requests are
 * refused and change nothing, a token (when set) is required, the OpenAI routes, metrics and probes
 * stay as they were; `snooze serve` refuses a non-loopback bind without a token.
 */

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** One request with exactly these headers (fetch would not let a test set Host). */
function raw(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode!, headers: res.headers, body: parsed });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const yaml = `
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
    sleepAfter: 10m
`;

async function start(adminToken?: string): Promise<LocalSnooze> {
  return startLocalSnooze({
    config: parseConfig(yaml, "test.yaml"),
    log: silentLogger,
    host: "127.0.0.1",
    port: 0,
    statsIntervalMs: 200,
    adminToken,
  });
}

const tierOf = (snooze: LocalSnooze) => snooze.activator.routes.get("qwen")!.tier;
const noCors = (answer: Answer) =>
  expect(Object.keys(answer.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);

describe("loopback without a token", () => {
  let snooze: LocalSnooze;
  beforeAll(async () => {
    snooze = await start();
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(response.status).toBe(200);
    await response.text();
    await until(() => tierOf(snooze) === "ready", 10_000, "qwen ready");
  });
  afterAll(() => snooze.close(1_000));

  test("a cross-origin simple POST (a web page's form) to stop is refused and the model keeps running", async () => {
    const answer = await raw(
      snooze.url,
      "POST",
      "/snooze/v1/models/qwen/stop",
      { origin: "http://evil.example", "content-type": "text/plain" },
      "x",
    );
    expect(answer.status).toBe(403);
    expect(answer.body.error).toMatchObject({ type: "permission_error", code: "cross_origin_refused" });
    expect(answer.body.error.message).toContain("http://evil.example");
    noCors(answer);
    // The same with no body, and as a CloudEvent: still refused.
    for (const [path, headers] of [
      ["/snooze/v1/models/qwen/stop", { origin: "http://evil.example" }],
      ["/snooze/v1/models/qwen/stop", { origin: "null" }],
      ["/snooze/v1/models/qwen/stop", { "sec-fetch-site": "cross-site" }],
      [
        "/snooze/v1/events",
        { origin: "http://evil.example", "ce-type": "dev.snooze.model.stop", "ce-subject": "qwen" },
      ],
    ] as const) {
      const refused = await raw(snooze.url, "POST", path, headers);
      expect(refused.status, `${path} ${JSON.stringify(headers)}`).toBe(403);
      noCors(refused);
    }
    const preflight = await raw(snooze.url, "OPTIONS", "/snooze/v1/models/qwen/stop", {
      origin: "http://evil.example",
      "access-control-request-method": "POST",
    });
    expect(preflight.status).toBe(403);
    noCors(preflight);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(tierOf(snooze)).toBe("ready");
    expect(snooze.autoscaler.controller("qwen")!.tier).toBe("ready");
  });

  test("form content types are refused on admin POSTs (415) even without an Origin", async () => {
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
    ]) {
      const answer = await raw(
        snooze.url,
        "POST",
        "/snooze/v1/models/qwen/stop",
        { "content-type": type },
        "a=b",
      );
      expect(answer.status, type).toBe(415);
      expect(answer.body.error).toMatchObject({ code: "unsupported_media_type", param: "content-type" });
    }
    const event = await raw(
      snooze.url,
      "POST",
      "/snooze/v1/events",
      { "content-type": "text/plain", "ce-type": "dev.snooze.model.stop", "ce-subject": "qwen" },
      "{}",
    );
    expect(event.status).toBe(415);
    expect(event.body.error).toMatchObject({ code: "unsupported_media_type", param: "content-type" });
    expect(tierOf(snooze)).toBe("ready");
  });

  test("a Host that is not a loopback name (DNS rebinding) is refused", async () => {
    const answer = await raw(snooze.url, "POST", "/snooze/v1/models/qwen/stop", {
      host: "evil.example:8080",
      origin: "http://evil.example:8080",
    });
    expect(answer.status).toBe(403);
    expect(answer.body.error.code).toBe("host_not_loopback");
    const read = await raw(snooze.url, "GET", "/snooze/v1/models", { host: "evil.example" });
    expect(read.status).toBe(403);
    expect(tierOf(snooze)).toBe("ready");
  });

  test("a same-origin request (the Origin is this server) and a plain local call are served", async () => {
    const host = new URL(snooze.url).host;
    const page = await raw(snooze.url, "GET", "/snooze/v1/models", { origin: `http://${host}` });
    expect(page.status).toBe(200);
    noCors(page);
    const local = await raw(snooze.url, "GET", "/snooze/v1/slots");
    expect(local.status).toBe(200);
    // The one stop that gets through stops the model: the refusals above were not no-ops by accident.
    const stop = await raw(snooze.url, "POST", "/snooze/v1/models/qwen/stop", {
      "content-type": "application/json",
    });
    expect(stop.status).toBe(200);
    expect(stop.body).toMatchObject({ model: "qwen", action: "stop", tier: "cold" });
  });
});

describe("with an admin token", () => {
  const token = "s3cret-token-0123456789";
  let snooze: LocalSnooze;
  beforeAll(async () => {
    snooze = await start(token);
  });
  afterAll(() => snooze.close(1_000));

  test("no token or a wrong one is 401; the right one is 200", async () => {
    const none = await raw(snooze.url, "GET", "/snooze/v1/models");
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer/);
    expect(none.body.error).toMatchObject({ type: "authentication_error", code: "missing_admin_token" });
    for (const authorization of [
      `Bearer ${token}x`,
      `Bearer ${token.slice(0, -1)}`,
      "Bearer",
      `Basic ${token}`,
      token,
    ]) {
      const wrong = await raw(snooze.url, "GET", "/snooze/v1/models", { authorization });
      expect(wrong.status, authorization).toBe(401);
    }
    const right = await raw(snooze.url, "GET", "/snooze/v1/models", { authorization: `Bearer ${token}` });
    expect(right.status).toBe(200);
    expect(right.body.models.map((m: { id: string }) => m.id)).toEqual(["qwen"]);
  });

  test("admin actions and events need it too; with it they act", async () => {
    const wake = await raw(snooze.url, "POST", "/snooze/v1/models/qwen/wake");
    expect(wake.status).toBe(401);
    const event = await raw(snooze.url, "POST", "/snooze/v1/events", {
      "ce-type": "dev.snooze.model.wake",
      "ce-subject": "qwen",
    });
    expect(event.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(tierOf(snooze)).toBe("cold");
    const woken = await raw(snooze.url, "POST", "/snooze/v1/models/qwen/wake", {
      authorization: `Bearer ${token}`,
    });
    expect(woken.status).toBe(202);
    await until(() => tierOf(snooze) === "ready", 10_000, "qwen ready");
    // A token does not make a cross-origin request acceptable.
    const crossOrigin = await raw(snooze.url, "POST", "/snooze/v1/models/qwen/stop", {
      authorization: `Bearer ${token}`,
      origin: "http://evil.example",
    });
    expect(crossOrigin.status).toBe(403);
    expect(tierOf(snooze)).toBe("ready");
  });

  test("the OpenAI routes, metrics and probes need no token", async () => {
    expect((await raw(snooze.url, "GET", "/v1/models")).status).toBe(200);
    expect((await raw(snooze.url, "GET", "/metrics")).status).toBe(200);
    expect((await raw(snooze.url, "GET", "/healthz")).status).toBe(200);
    expect((await raw(snooze.url, "GET", "/readyz")).status).toBe(200);
  });
});

describe("snooze serve and snooze status as processes", () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
  });
  const dir = mkdtempSync(join(tmpdir(), "snooze-admin-"));
  const config = join(dir, "snooze.yaml");
  writeFileSync(config, yaml);

  function run(args: string[], env: Record<string, string | undefined> = {}) {
    const child = spawn(process.execPath, ["bin/snooze.js", ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, SNOOZE_ADMIN_TOKEN: undefined, ...env },
    });
    children.push(child);
    let output = "";
    child.stdout!.on("data", (c) => (output += c));
    child.stderr!.on("data", (c) => (output += c));
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    const url = new Promise<string>((resolve, reject) => {
      child.stderr!.on("data", () => {
        const match = /"msg":"listening"[^\n]*?"url":"([^"]+)"/.exec(output);
        if (match) resolve(match[1]!);
      });
      void exited.then(() => reject(new Error(`exited early:\n${output}`)));
    });
    url.catch(() => {});
    return { exited, url, output: () => output };
  }

  test("a non-loopback bind without a token: exit 2, saying what to do", async () => {
    const serve = run(["serve", "--config", config, "--host", "0.0.0.0", "--port", "0"]);
    expect(await serve.exited).toBe(2);
    expect(serve.output()).toContain(
      "--host 0.0.0.0 is not a loopback address, so the admin API needs a token",
    );
    expect(serve.output()).toContain("--admin-token-file");
    const empty = join(dir, "empty-token");
    writeFileSync(empty, "\n");
    const emptyFile = run([
      "serve",
      "--config",
      config,
      "--host",
      "0.0.0.0",
      "--port",
      "0",
      "--admin-token-file",
      empty,
    ]);
    expect(await emptyFile.exited).toBe(2);
    expect(emptyFile.output()).toContain("is empty");
  });

  test("with a token file on 0.0.0.0 it serves; snooze status sends the token from the file or $SNOOZE_ADMIN_TOKEN", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "file-token-abc\n");
    const serve = run([
      "serve",
      "--config",
      config,
      "--host",
      "0.0.0.0",
      "--port",
      "0",
      "--shutdown-grace",
      "1s",
      "--admin-token-file",
      tokenFile,
    ]);
    const port = new URL(await serve.url).port;
    const url = `http://127.0.0.1:${port}`;
    const status = (args: string[], env: Record<string, string> = {}) => {
      const child = run(["status", "--url", url, ...args], env);
      return child.exited.then((code) => ({ code, output: child.output() }));
    };
    const without = await status([]);
    expect(without.code).toBe(1);
    expect(without.output).toContain("401");
    const fromFile = await status(["--admin-token-file", tokenFile]);
    expect(fromFile).toMatchObject({ code: 0, output: expect.stringContaining("qwen") });
    const fromEnv = await status([], { SNOOZE_ADMIN_TOKEN: "file-token-abc" });
    expect(fromEnv.code).toBe(0);
    const wrongEnv = await status([], { SNOOZE_ADMIN_TOKEN: "nope" });
    expect(wrongEnv.code).toBe(1);
  }, 20_000);
});
