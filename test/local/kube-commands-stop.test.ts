import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { tokenKubeconfig } from "../support/token-kubeconfig.ts";

/**
 * The Kubernetes commands as real processes, against an API server that takes every connection and
 * never answers: a SIGTERM while they start stops them at once with exit 0, not after their
 * requests time out (a pod's 30 s grace would end in a SIGKILL).
 */
let silent: Server;
const sockets = new Set<Socket>();
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  silent = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  const { port } = silent.address() as { port: number };
  ({ dir, path: kubeconfig } = tokenKubeconfig(port, "snooze-kube-stop-"));
});
afterAll(() => {
  for (const socket of sockets) socket.destroy();
  silent.close();
  rmSync(dir, { recursive: true, force: true });
});

test.each([
  ["webhooks", ["--port", "0", "--host", "127.0.0.1"]],
  ["activator", ["--port", "0", "--host", "127.0.0.1"]],
  ["autoscaler", ["--port", "0", "--host", "127.0.0.1"]],
])(
  "snooze %s: a SIGTERM while the API server does not answer exits 0 within a few seconds",
  {
    timeout: 30_000,
  },
  async (command, flags) => {
    // Found by an outside tester: `snooze webhooks` took until its certificate request timed out
    // (about 30 s after it started), whatever the --shutdown-grace.
    const child = spawn(process.execPath, ["bin/snooze.js", command, "--kubeconfig", kubeconfig, ...flags], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // Past loading (webhooks and autoscaler say "starting"; the activator says nothing yet), with
    // its first requests to the API server open.
    const deadline = Date.now() + 3_000;
    while (!stderr.includes('"starting"') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const signalled = performance.now();
    child.kill("SIGTERM");
    const code = await exited;
    expect(code, stderr).toBe(0);
    expect(performance.now() - signalled).toBeLessThan(5_000);
  },
);
