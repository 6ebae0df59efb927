import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../../lib/free-port.ts";
import { type ManagedProcess, startProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

export interface Etcd {
  /** The client URL the apiserver talks to. */
  url: string;
  process: ManagedProcess;
  stop(): Promise<void>;
}

/**
 * A single-member etcd on loopback with a throwaway data dir, started with the flags
 * controller-runtime's envtest uses (plain HTTP on 127.0.0.1, no fsync: the data dies with the test).
 */
export async function startEtcd(binDir: string, dir: string): Promise<Etcd> {
  const dataDir = join(dir, "etcd-data");
  await mkdir(dataDir, { recursive: true });
  const clientPort = await freePort();
  const peerPort = await freePort();
  const url = `http://127.0.0.1:${clientPort}`;
  const process = startProcess(
    "etcd",
    join(binDir, "etcd"),
    [
      `--name=snooze-e2e`,
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=snooze-e2e=http://127.0.0.1:${peerPort}`,
      "--unsafe-no-fsync=true",
      "--log-level=warn",
    ],
    { logPath: join(dir, "etcd.log") },
  );
  await waitFor(
    async () => {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      const body = (await response.json()) as { health?: string };
      return response.ok && body.health === "true" ? true : undefined;
    },
    { what: "etcd /health", timeoutMs: 60_000, abort: process.exited, detail: () => process.tail() },
  );
  return { url, process, stop: () => process.stop() };
}
