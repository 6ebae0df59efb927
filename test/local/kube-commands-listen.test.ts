import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { tokenKubeconfig } from "../support/token-kubeconfig.ts";

/**
 * The Kubernetes commands as real processes whose port another process holds: one line saying so
 * and exit code 1, as `snooze serve` says it, not Node's stack trace. Their API server answers every
 * list empty and keeps every watch open, so the activator (which lists before it listens) gets there.
 */
let api: HttpServer;
let taken: Server;
let takenPort: number;
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  api = createHttpServer((request, response) => {
    const url = request.url ?? "";
    if (url.includes("watch=")) {
      response.writeHead(200, { "content-type": "application/json" });
      return;
    }
    // Discovery of an API group (Knative's): not served.
    if (url.startsWith("/apis/") && url.split("/").length <= 4) {
      response.writeHead(404).end("{}");
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(
      JSON.stringify({ kind: "List", apiVersion: "v1", metadata: { resourceVersion: "1" }, items: [] }),
    );
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  takenPort = (taken.address() as { port: number }).port;
  ({ dir, path: kubeconfig } = tokenKubeconfig(
    (api.address() as { port: number }).port,
    "snooze-kube-listen-",
  ));
});
afterAll(() => {
  api.closeAllConnections();
  api.close();
  taken.close();
  rmSync(dir, { recursive: true, force: true });
});

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ["bin/snooze.js", ...args, "--kubeconfig", kubeconfig], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  // Bounded: one that does not exit is ended, and the test fails on its exit code.
  const guard = setTimeout(() => child.kill("SIGKILL"), 15_000);
  return new Promise((resolve) =>
    child.once("close", (code) => {
      clearTimeout(guard);
      resolve({ code, stderr });
    }),
  );
}

test.each([
  ["activator", "--port", "--port"],
  ["webhooks", "--port", "--port"],
  ["autoscaler", "--port", "--port"],
  ["autoscaler", "--grpc-port", "--grpc-port"],
])(
  "snooze %s with its %s in use: one line saying so, exit code 1, no stack trace",
  { timeout: 30_000 },
  async (command, flag, named) => {
    // Found by an outside tester: each ended with Node's EADDRINUSE stack trace (gRPC's own error
    // for the autoscaler's --grpc-port).
    const others =
      command === "autoscaler" ? (flag === "--port" ? ["--grpc-port", "0"] : ["--port", "0"]) : [];
    const { code, stderr } = await run([command, "--host", "127.0.0.1", flag, String(takenPort), ...others]);
    expect(stderr).toContain(
      `snooze ${command}: cannot listen on 127.0.0.1:${takenPort}: the port is in use (pass another ${named})\n`,
    );
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(code).toBe(1);
  },
);

test("snooze autoscaler with --grpc-port the same as --port: a usage error (exit code 2)", async () => {
  const { code, stderr } = await run(["autoscaler", "--port", "18999", "--grpc-port", "18999"]);
  expect(stderr).toContain(
    "snooze autoscaler: --grpc-port 18999 is the --port too: the HTTP and gRPC ports must differ",
  );
  expect(code).toBe(2);
});
