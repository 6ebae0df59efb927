import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, test } from "vitest";
import { freePort } from "../lib/free-port.ts";

/**
 * Each command loads only what it uses (issue 14: idle memory). A real `snooze` process runs with a
 * loader hook that lists every module it loaded (test/support/module-list-hook.ts); the test reads
 * the list after the command has started serving and has been stopped.
 */
const repo = fileURLToPath(new URL("..", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "snooze-modules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Starts `snooze <args>`, waits until `port` answers `path`, runs `use` against it, stops it,
 * returns the modules it loaded.
 */
async function modulesOf(
  args: string[],
  port: number,
  path: string,
  use: () => Promise<void> = async () => {},
): Promise<string[]> {
  const list = join(dir, `modules-${port}.txt`);
  const child = spawn(
    process.execPath,
    ["--import", join(repo, "test/support/module-list-hook.ts"), join(repo, "bin/snooze.js"), ...args],
    { env: { ...process.env, SNOOZE_MODULE_LIST: list, SNOOZE_LOG_LEVEL: "error" }, stdio: "ignore" },
  );
  const exited = once(child, "exit");
  try {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}${path}`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (child.exitCode !== null) throw new Error(`snooze ${args[0]} exited with ${child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`snooze ${args[0]} did not answer ${path}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await use();
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
  return readFileSync(list, "utf8").split("\n");
}

const kubernetes = /\/lib\/kube\/|\/node_modules\/@kubernetes\//;
const openTelemetry = /\/node_modules\/@opentelemetry\//;
const grpc = /\/node_modules\/@grpc\//;
// Node's own undici (fetch, WebSocket): `import … from "node:http"` loaded it (lib/node-http.ts), and
// so did the engine client's first call while it used fetch (autoscaler/engine-client.ts).
const bundledUndici = /^internal:internal\/deps\/undici\//;

test("snooze sim loads neither the Kubernetes client nor OpenTelemetry nor gRPC", {
  timeout: 30_000,
}, async () => {
  const port = await freePort();
  const modules = await modulesOf(["sim", "--port", String(port)], port, "/health");
  // The list is real: the simulator's own server is in it.
  expect(modules.some((url) => url.endsWith("/hack/sim/server.ts"))).toBe(true);
  expect(modules.filter((url) => kubernetes.test(url))).toEqual([]);
  expect(modules.filter((url) => openTelemetry.test(url))).toEqual([]);
  expect(modules.filter((url) => grpc.test(url))).toEqual([]);
  expect(modules.filter((url) => bundledUndici.test(url))).toEqual([]);
});

test("snooze serve loads no Kubernetes client, gRPC, OpenTelemetry SDK, CloudEvents SDK or zod locale but English", {
  timeout: 30_000,
}, async () => {
  const port = await freePort();
  const config = join(dir, "snooze.yaml");
  writeFileSync(
    config,
    `models:\n  m:\n    command: ["\${SNOOZE}", sim, --served-model-name, m, --port, "\${PORT}", --load-time, 0s, --enable-sleep-mode]\n`,
  );
  const url = `http://127.0.0.1:${port}`;
  const chat = async () => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
    });
    expect(response.status).toBe(200);
    await response.text();
  };
  // Not only idle: a cold start, a sleep and a wake, so the engine client's calls are in the list.
  const modules = await modulesOf(
    ["serve", "--config", config, "--port", String(port)],
    port,
    "/healthz",
    async () => {
      await chat();
      const slept = await fetch(`${url}/snooze/v1/models/m/sleep`, { method: "POST" });
      expect(slept.status).toBe(200);
      expect(((await slept.json()) as { tier: string }).tier).toBe("asleep-1");
      await chat();
    },
  );
  expect(modules.some((url) => url.endsWith("/activator/server.ts"))).toBe(true);
  expect(modules.filter((url) => kubernetes.test(url))).toEqual([]);
  expect(modules.filter((url) => grpc.test(url))).toEqual([]);
  expect(modules.filter((url) => bundledUndici.test(url))).toEqual([]);
  // Of undici, only the dispatchers it uses (lib/undici.ts), not the package's index (fetch, WebSocket, …).
  expect(modules.some((url) => url.endsWith("/node_modules/undici/lib/dispatcher/pool.js"))).toBe(true);
  expect(modules.filter((url) => /\/node_modules\/undici\/(index\.js|lib\/web\/)/.test(url))).toEqual([]);
  // The tracing API is used (a no-op until configured); the SDK loads only when tracing is on.
  expect(modules.filter((url) => /\/node_modules\/@opentelemetry\/sdk-/.test(url))).toEqual([]);
  // Nor OpenTelemetry's core (its W3C propagator), until a traceparent is read (lib/tracing.ts).
  expect(
    modules.filter((url) => /\/node_modules\/@opentelemetry\/(core|semantic-conventions)\//.test(url)),
  ).toEqual([]);
  // No event sink is set and no event came in: the CloudEvents SDK waits (lib/cloudevents-sdk.ts).
  expect(modules.filter((url) => /\/node_modules\/cloudevents\//.test(url))).toEqual([]);
  // Of prom-client, the four classes used (lib/prometheus.ts), not its index: that loads the push
  // gateway, the cluster aggregator and the default metrics, which load OpenTelemetry's API twice.
  expect(modules.some((url) => url.endsWith("/node_modules/prom-client/lib/histogram.js"))).toBe(true);
  expect(
    modules.filter((url) => /\/node_modules\/prom-client\/(index|lib\/pushgateway)\.js$/.test(url)),
  ).toEqual([]);
  expect(modules.filter((url) => /\/node_modules\/@opentelemetry\/api\/.*\.cjs$/.test(url))).toEqual([]);
  // Of zod's 63 locales, which every zod entry point re-exports, only the English one it uses
  // (lib/zod-locales-hook.ts, registered by bin/snooze.js).
  expect(modules.some((url) => url.endsWith("/node_modules/zod/v4/classic/schemas.js"))).toBe(true);
  expect(modules.filter((url) => /\/node_modules\/zod\/v4\/locales\/(?!en\.js$)/.test(url))).toEqual([]);
});

test("an idle snooze serve loads no HTTP client nor node:crypto until it starts an engine", {
  timeout: 30_000,
}, async () => {
  const port = await freePort();
  const config = join(dir, "idle.yaml");
  writeFileSync(config, `models:\n  m:\n    command: ["\${SNOOZE}", sim, --port, "\${PORT}"]\n`);
  const modules = await modulesOf(["serve", "--config", config, "--port", String(port)], port, "/healthz");
  expect(modules.some((url) => url.endsWith("/activator/server.ts"))).toBe(true);
  // undici's dispatchers load at their first use (lib/undici.ts), and with them Node's http2 and tls.
  expect(modules.filter((url) => /\/node_modules\/undici\//.test(url))).toEqual([]);
  expect(modules.filter((url) => /^internal:(http2|tls|internal\/http2\/.*)$/.test(url))).toEqual([]);
  // Nor node:crypto: the first engine's token, admin token check or status page loads it.
  expect(modules.filter((url) => /^internal:(crypto|internal\/crypto\/.*)$/.test(url))).toEqual([]);
});

test("a traceparent read loads OpenTelemetry's core once, as the ES module the API and SDK are", {
  timeout: 30_000,
}, async () => {
  const port = await freePort();
  const config = join(dir, "traced.yaml");
  writeFileSync(config, `models:\n  m:\n    command: ["\${SNOOZE}", sim, --port, "\${PORT}"]\n`);
  const modules = await modulesOf(
    ["serve", "--config", config, "--port", String(port)],
    port,
    "/healthz",
    async () => {
      // An event's distributed-tracing extension is read by lib/tracing.ts's W3C propagator.
      const response = await fetch(`http://127.0.0.1:${port}/snooze/v1/events`, {
        method: "POST",
        headers: { "content-type": "application/cloudevents+json" },
        body: JSON.stringify({
          specversion: "1.0",
          id: "1",
          source: "/test",
          type: "dev.snooze.model.wake",
          subject: "m",
          traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        }),
      });
      expect(response.status).toBe(202);
    },
  );
  expect(modules.some((url) => url.endsWith("/node_modules/@opentelemetry/core/dist/index.mjs"))).toBe(true);
  // Its CommonJS build would bring a second copy of the core and of the API beside the ES ones.
  expect(modules.filter((url) => /\/node_modules\/@opentelemetry\/.*\.cjs$/.test(url))).toEqual([]);
});

test("snooze --help loads no command's module", () => {
  const list = join(dir, "modules-help.txt");
  const result = spawnSync(
    process.execPath,
    ["--import", join(repo, "test/support/module-list-hook.ts"), join(repo, "bin/snooze.js"), "--help"],
    { env: { ...process.env, SNOOZE_MODULE_LIST: list }, encoding: "utf8" },
  );
  expect(result.status).toBe(0);
  // Every summary is listed, from cli/commands.ts, without importing what the commands run.
  expect(result.stdout).toMatch(/^ {2}autoscaler {2}Run the control plane on Kubernetes/m);
  const ours = readFileSync(list, "utf8")
    .split("\n")
    .filter((url) => url.startsWith("file:") && !url.includes("/test/support/"))
    .map((url) => url.slice(url.lastIndexOf("/", url.lastIndexOf("/") - 1) + 1));
  expect(ours.sort()).toEqual([
    "bin/snooze.js",
    "cli/command.ts",
    "cli/commands.ts",
    "cli/main.ts",
    "cli/output-failures.ts",
    "lib/cli-flags.ts",
    "lib/zod-locales-hook.ts",
  ]);
});
