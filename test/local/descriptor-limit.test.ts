import { type ChildProcess, execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { Agent, fetch } from "undici";
import { afterEach, expect, test } from "vitest";
import { chat, simCommand, until } from "../helpers/local-snooze.ts";
import { serveProcess, writeConfig } from "../helpers/serve-process.ts";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
});

/** Sets the soft limit on open descriptors of a running process (`prlimit`), its hard one kept. */
function limitDescriptors(pid: number, soft: number): void {
  const hard = /^Max open files\s+\d+\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"))![1];
  execFileSync("prlimit", ["--pid", String(pid), `--nofile=${soft}:${hard}`]);
}

/**
 * The descriptor a process would open next: the lowest number it does not use. A limit of it leaves
 * the process none to open (the limit is on descriptor numbers, not on how many are open).
 */
function lowestFreeDescriptor(pid: number): number {
  const used = new Set(readdirSync(`/proc/${pid}/fd`).map(Number));
  let fd = 0;
  while (used.has(fd)) fd++;
  return fd;
}

// Found by an outside tester: out of descriptors, the engine's port could not be looked for (every
// port tried failed with EMFILE, said as `no 1 consecutive free ports`), and the start was decided
// again at once, forever: a loop of promises that kept Snooze's event loop from timers and
// sockets, a core spinning, 700,000 `starting` lines in ten minutes, held requests never answered
// (not even at their hold budget) and SIGTERM unheard.
// `prlimit` is util-linux's (essential on Debian): a machine without it fails here, not skips.
test("out of file descriptors when a start picks the engine's port: a 503 saying why, then a start once they are back", async () => {
  const file = writeConfig(`models:\n  m:\n    holdBudget: 60s\n    command: ${simCommand([], 1)}\n`);
  const run = serveProcess(file, ["--shutdown-grace", "2s"]);
  children.push(run.child);
  const url = await run.url;
  const pid = run.child.pid!;
  // One connection, open before the limit: it takes the last descriptor, and carries the request.
  const client = new Agent({ connections: 1 });
  try {
    expect((await fetch(`${url}/healthz`, { dispatcher: client })).status).toBe(200);
    limitDescriptors(pid, lowestFreeDescriptor(pid));
    const refused = await fetch(`${url}/v1/chat/completions`, {
      ...chat("m"),
      dispatcher: client,
      signal: AbortSignal.timeout(20_000),
    });
    expect(refused.status).toBe(503);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("activation_failed");
    expect(body.error.message).toContain("out of file descriptors (EMFILE)");
  } finally {
    await client.close();
  }

  limitDescriptors(pid, 1024);
  await until(
    async () => (await fetch(`${url}/v1/chat/completions`, chat("m"))).status === 200,
    20_000,
    "a start once descriptors are free",
  );
  // One failed start, not a start decided again and again.
  expect(run.stderr().match(/"msg":"starting"/g)?.length).toBeLessThanOrEqual(3);
  run.child.kill("SIGTERM");
  expect(await run.exited).toBe(0);
}, 60_000);
