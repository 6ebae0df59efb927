/** Forks a load-generator script with IPC and sends it commands that each get one reply. */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";

export interface ClientProcess<C> {
  pid: number;
  ask<R>(command: C, timeoutMs?: number): Promise<R>;
  /** Messages the script sends on its own (not replies). */
  onEvent(listener: (event: Record<string, unknown>) => void): void;
  close(): Promise<void>;
}

export async function forkClient<C>(script: string, config: unknown): Promise<ClientProcess<C>> {
  const file = fileURLToPath(new URL(script, import.meta.url));
  const child: ChildProcess = fork(file, [JSON.stringify(config)], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    // Structured clone, not JSON: a reply's NaN or Infinity ("never") arrives as itself, not null.
    serialization: "advanced",
  });
  const exited = once(child, "exit");
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  const listeners: ((event: Record<string, unknown>) => void)[] = [];
  let sequence = 0;
  const ready = new Promise<void>((resolve, reject) => {
    child.on("message", (message: { id?: number; ready?: boolean; reply?: unknown; error?: string }) => {
      if (message.ready) return resolve();
      if (message.id === undefined) {
        for (const listener of listeners) listener(message as Record<string, unknown>);
        return;
      }
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (message.error) waiter?.reject(new Error(message.error));
      else waiter?.resolve(message.reply);
    });
    child.once("exit", (code) => {
      reject(new Error(`${script} exited with code ${code}`));
      for (const waiter of pending.values()) waiter.reject(new Error(`${script} exited with code ${code}`));
    });
  });
  await ready;
  return {
    pid: child.pid!,
    ask<R>(command: C, timeoutMs = 120_000): Promise<R> {
      return new Promise<R>((resolve, reject) => {
        const id = ++sequence;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${script} did not answer within ${timeoutMs}ms`));
        }, timeoutMs);
        pending.set(id, {
          resolve: (value) => {
            clearTimeout(timer);
            resolve(value as R);
          },
          reject: (error) => {
            clearTimeout(timer);
            reject(error);
          },
        });
        child.send({ id, command });
      });
    },
    onEvent: (listener) => listeners.push(listener),
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
