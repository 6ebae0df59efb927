/** A server the benchmark runs as a child process: started, awaited on its port, stopped. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { freePort, waitForPort } from "./ports.ts";

export interface ServerProcess {
  pid: number;
  stop(): Promise<void>;
}

export async function startServerProcess(
  argv: readonly string[],
  port: number,
  env: NodeJS.ProcessEnv = {},
): Promise<ServerProcess> {
  const [file, ...args] = argv;
  const child = spawn(file!, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = once(child, "exit");
  try {
    await waitForPort(port, 20_000, () => child.exitCode !== null);
  } catch (error) {
    child.kill("SIGKILL");
    throw error;
  }
  return {
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The Node.js yardsticks beside the activator, each a script in this folder. */
export type NodeProxy = "minimal-proxy" | "node-relay" | "framed-proxy";

/**
 * Starts one of the Node.js yardsticks (`minimal-proxy.ts`, `node-relay.ts`, `framed-proxy.ts`) on a free port in front
 * of `upstream` (host:port), with its extra flags.
 */
export async function startNodeProxy(
  which: NodeProxy,
  upstream: string,
  flags: readonly string[] = [],
): Promise<ServerProcess & { url: string }> {
  const port = await freePort();
  const script = fileURLToPath(new URL(`./${which}.ts`, import.meta.url));
  const server = await startServerProcess(
    [process.execPath, script, "--port", String(port), "--upstream", upstream, ...flags],
    port,
  );
  return { ...server, url: `http://127.0.0.1:${port}` };
}
