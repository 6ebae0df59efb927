import { afterEach, describe, expect, test } from "vitest";
import type { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, startWith, until } from "../helpers/local-snooze.ts";
import { running } from "../helpers/serve-process.ts";

// The engine guard (autoscaler/local/engine-guard.js) is a Node.js process, and Node gives SIGUSR1
// a meaning of its own: it opens the inspector, a debugger any local process can drive. Real
// processes here: what matters is what the guard does with a signal meant for the engine.

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const platformOf = (s: LocalSnooze) => s.platform as LocalPlatform;

describe.skipIf(process.platform !== "linux")(
  "user signals reach the engine, not Node's debugger in its guard",
  () => {
    test("an engine ended by SIGUSR1 is told as that signal with its own last words, not as code 138 with the inspector's", async () => {
      // Found by a probe: the guard passed the engine's end on by sending itself SIGUSR1, which opened
      // the inspector on 127.0.0.1:9229; the start failed "engine exited (code 138): … | Debugger
      // listening on ws://127.0.0.1:9229/… | For help, see: https://nodejs.org/…".
      const script = "echo 'RuntimeError: the engine gave up' >&2; kill -USR1 $$";
      snooze = await startWith(`
models:
  m:
    command: ["sh", "-c", ${JSON.stringify(script)}, "\${PORT}"]
`);
      const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("m"));
      expect(response.status).toBe(503);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("activation_failed");
      expect(error.message).toMatch(/engine exited \(signal SIGUSR1\): RuntimeError: the engine gave up$/);
      expect(error.message).not.toMatch(/Debugger|inspector|9229/);
    });

    test("SIGUSR1 and SIGUSR2 sent to an engine's process group (a traceback dump, a log reopen) leave the guard running, with no debugger opened", async () => {
      // The engine handles both, as a Python engine with faulthandler.register(SIGUSR1) does.
      const engine = [
        "for (const s of ['SIGUSR1', 'SIGUSR2']) process.on(s, () => console.log('engine got ' + s));",
        "require('node:http').createServer((q, s) => s.end(q.url === '/health' ? '' : JSON.stringify({ choices: [] })))",
        "  .listen(Number(process.argv[1]), '127.0.0.1');",
      ].join("\n");
      snooze = await startWith(`
models:
  m:
    warmup: false
    command: [${JSON.stringify(process.execPath)}, "-e", ${JSON.stringify(engine)}, "\${PORT}"]
`);
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("m"))).status).toBe(200);
      const platform = platformOf(snooze);
      const [replica] = platform.replicaSet("m")!.replicas;
      const guard = platform.pid(replica!.id)!;
      const lines = () => platform.logs("m").flatMap((e) => e.lines);
      for (const signal of ["SIGUSR1", "SIGUSR2"] as const) {
        process.kill(-guard, signal);
        await until(() => lines().includes(`engine got ${signal}`), 5_000, `the engine to get ${signal}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 300)); // the inspector says so as it opens
      expect(lines().join("\n")).not.toMatch(/Debugger|inspector/);
      expect(running(guard)).toBe(true);
      expect(platform.replicaSet("m")!.replicas.map((r) => r.id)).toEqual([replica!.id]);
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("m"))).status).toBe(200);
    });
  },
);
