import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { ConfigError } from "./config-error.ts";
import { loadConfigFile } from "./load.ts";
import { loadConfigFileOffLoop, offLoopConfigBytes } from "./load-off-loop.ts";

const dir = mkdtempSync(join(tmpdir(), "snooze-load-off-loop-"));

/** A settings file at least `bytes` long: `head`, then top-level `x-` entries of the user's own. */
function file(name: string, head: string, bytes = offLoopConfigBytes): string {
  let text = head;
  for (let i = 0; text.length < bytes; i++) text += `x-own-${i}: &own${i} {a: "value ${i}", b: [1, 2, 3]}\n`;
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** Whether the event loop turned while `work` ran. */
async function turnsDuring<T>(
  work: () => Promise<T>,
): Promise<{ turned: boolean; result: PromiseSettledResult<T> }> {
  let turned = false;
  setImmediate(() => {
    turned = true;
  });
  const [result] = await Promise.allSettled([work()]);
  return { turned, result: result! };
}

const valid = `
hostMemoryBudget: 64Gi
bodyTimeout: never
defaults: { sleepAfter: never, holdBudget: 2m }
models:
  qwen:
    command: [vllm, serve, "\${MODEL}", --port, "\${PORT}"]
    aliases: [q, "10"]
    env: { HF_HOME: /models }
    slot: gpu0
  gemma:
    command: [llama-server, --port, "\${PORT}"]
    port: 48123
    sleepAfter: 5m
slots:
  gpu0: { maxWait: never }
`;

test("a large file is parsed on a worker thread: the event loop turns, and the settings are those read on it", async () => {
  const path = file("valid.yaml", valid);
  const { turned, result } = await turnsDuring(() => loadConfigFileOffLoop(path, { listenPort: 48000 }));
  expect(turned).toBe(true);
  // Maps, Infinity ("never") and the file's order, whole across the thread boundary.
  expect(result).toEqual({ status: "fulfilled", value: await loadConfigFile(path, { listenPort: 48000 }) });
  const config = (result as PromiseFulfilledResult<Awaited<ReturnType<typeof loadConfigFile>>>).value;
  expect([...config.models.keys()]).toEqual(["qwen", "gemma"]);
  expect(config.bodyTimeout).toBe(Number.POSITIVE_INFINITY);
});

test("an invalid large file is the ConfigError it is on the event loop: each problem at file:line:col, the key, the reason", async () => {
  const path = file(
    "invalid.yaml",
    valid.replace("sleepAfter: 5m", "sleepAftr: 5m").replace("48123", "48000"),
  );
  const here = await loadConfigFile(path, { listenPort: 48000 }).catch((error: unknown) => error);
  const { turned, result } = await turnsDuring(() => loadConfigFileOffLoop(path, { listenPort: 48000 }));
  expect(turned).toBe(true);
  expect(here).toBeInstanceOf(ConfigError);
  expect(result.status).toBe("rejected");
  const there = (result as PromiseRejectedResult).reason as ConfigError;
  expect(there).toBeInstanceOf(ConfigError);
  expect(there.message).toBe((here as ConfigError).message);
  expect(there.problems).toEqual((here as ConfigError).problems);
  expect(there.problems.length).toBe(2);
});

test("a file not UTF-8 is refused as on the event loop", async () => {
  const path = file("latin1.yaml", valid);
  writeFileSync(path, Buffer.concat([Buffer.from("x-caf"), Buffer.from([0xe9]), Buffer.from(": 1\n")]), {
    flag: "a",
  });
  const here = await loadConfigFile(path).catch((error: unknown) => error);
  const there = await loadConfigFileOffLoop(path).catch((error: unknown) => error);
  expect((there as ConfigError).message).toBe((here as ConfigError).message);
  expect((there as ConfigError).message).toMatch(/not UTF-8/);
});

test("a worker past its time limit is given up: the file is refused, saying so", async () => {
  const path = file("slow.yaml", valid, 200 * 1024);
  const error = await loadConfigFileOffLoop(path, {}, { timeoutMs: 1 }).catch((error: unknown) => error);
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).message).toMatch(
    /^.*slow\.yaml: \(top level\): reading the settings took longer than 0\.001 s, and was given up; the file is \d+ bytes$/,
  );
  // The next reload gets a worker of its own.
  await expect(loadConfigFileOffLoop(path)).resolves.toBeDefined();
});

test("a small file is parsed on the event loop, as before, to the same settings", async () => {
  const path = join(dir, "small.yaml");
  writeFileSync(path, valid);
  expect(await loadConfigFileOffLoop(path)).toEqual(await loadConfigFile(path));
});
