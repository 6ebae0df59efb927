/**
 * Memory of a `snooze serve` whose slot is busy: two models on one slot, one asleep, requests sent
 * one after the other to the other one. Every change of the busy model's load has the asleep one
 * re-plan and re-arm its next decision; this reads what that leaves behind, through the inspector
 * after a full garbage collection: the heap, the count of Node's timer lists (one per distinct
 * delay) and the RSS. With `BENCH_BASELINE` (another checkout, e.g. a worktree of the previous
 * commit) the two run alternately, each in a `snooze serve` of its own.
 *
 *   [BENCH_BASELINE=<another checkout>] node hack/bench/busy-slot-memory.ts [--requests 20000] [--rounds 2]
 *
 * Loopback only; each round sends at most `--requests` requests and stops after 60 s.
 */
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Agent, request } from "undici";
import { postJson } from "./context.ts";
import { freePort, host } from "./ports.ts";
import { startServerProcess } from "./server-process.ts";
import { median } from "./stats.ts";

const { values } = parseArgs({ options: { requests: { type: "string" }, rounds: { type: "string" } } });
const requests = Number(values.requests ?? 20_000);
const rounds = Number(values.rounds ?? 2);
const checkouts: Record<string, string> = { this: fileURLToPath(new URL("../..", import.meta.url)) };
if (process.env.BENCH_BASELINE) checkouts.baseline = process.env.BENCH_BASELINE;

const dir = mkdtempSync(join(tmpdir(), "snooze-busy-slot-"));
const config = join(dir, "snooze.yaml");
const sim = `["\${SNOOZE}", sim, --served-model-name, "\${MODEL}", --port, "\${PORT}", --enable-sleep-mode, --load-time, 0s, --ttft, 0ms, --itl, 0ms]`;
writeFileSync(
  config,
  `slots:\n  gpu0: {}\nmodels:\n  busy: { slot: gpu0, command: ${sim} }\n  asleep: { slot: gpu0, command: ${sim} }\n`,
);

interface Reading {
  sent: number;
  timerLists: number;
  heapMiB: number;
  rssMiB: number;
}
const readings: Record<string, Reading[]> = Object.fromEntries(Object.keys(checkouts).map((k) => [k, []]));

/** The inspector of a process, over its WebSocket: one call at a time. */
async function inspector(port: number) {
  const [target] = (await (await fetch(`http://${host}:${port}/json/list`)).json()) as {
    webSocketDebuggerUrl: string;
  }[];
  const socket = new WebSocket(target!.webSocketDebuggerUrl);
  await once(socket, "open");
  let id = 0;
  const call = (method: string, params: object = {}) =>
    new Promise<any>((resolve) => {
      const mine = ++id;
      const onMessage = (event: MessageEvent) => {
        const message = JSON.parse(String(event.data));
        if (message.id !== mine) return;
        socket.removeEventListener("message", onMessage);
        resolve(message.result);
      };
      socket.addEventListener("message", onMessage);
      socket.send(JSON.stringify({ id: mine, method, params }));
    });
  return { call, close: () => socket.close() };
}

/** Node's timer lists are internal: a timer first in its list points at it, which gives their prototype. */
const timerListPrototype =
  "(() => { const t = setTimeout(() => {}, 987654321); const p = Object.getPrototypeOf(t._idlePrev); clearTimeout(t); return p; })()";

async function measure(name: string): Promise<void> {
  const [port, inspectPort] = [await freePort(), await freePort()];
  const url = `http://${host}:${port}`;
  const serve = await startServerProcess(
    [
      process.execPath,
      `--inspect=${host}:${inspectPort}`,
      join(checkouts[name]!, "bin/snooze.js"),
      "serve",
      "--config",
      config,
      "--port",
      String(port),
      "--state-dir",
      join(dir, `state-${name}`),
    ],
    port,
    { SNOOZE_LOG_LEVEL: "error" },
  );
  const dispatcher = new Agent({ connections: 1 });
  try {
    const chat = async (model: string) => {
      const answer = await request(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
        dispatcher,
      });
      await answer.body.arrayBuffer();
      if (answer.statusCode !== 200) throw new Error(`${name}: ${model} answered ${answer.statusCode}`);
    };
    await chat("asleep");
    const slept = await postJson(`${url}/snooze/v1/models/asleep/sleep`, {});
    if (slept.status !== 200) throw new Error(`${name}: sleep answered ${slept.status}`);
    const deadline = performance.now() + 60_000;
    let sent = 0;
    while (sent < requests && performance.now() < deadline) {
      await chat("busy");
      sent++;
    }
    const inspect = await inspector(inspectPort);
    try {
      await inspect.call("HeapProfiler.collectGarbage");
      await inspect.call("HeapProfiler.collectGarbage");
      const heap = await inspect.call("Runtime.getHeapUsage");
      const prototype = await inspect.call("Runtime.evaluate", { expression: timerListPrototype });
      const lists = await inspect.call("Runtime.queryObjects", {
        prototypeObjectId: prototype.result.objectId,
      });
      const count = await inspect.call("Runtime.callFunctionOn", {
        objectId: lists.objects.objectId,
        functionDeclaration: "function () { return this.length; }",
        returnByValue: true,
      });
      const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${serve.pid}/status`, "utf8"))![1]) / 1024;
      readings[name]!.push({
        sent,
        timerLists: count.result.value,
        heapMiB: heap.usedSize / 2 ** 20,
        rssMiB: rss,
      });
      console.log(
        `${name}: ${sent} requests; timer lists ${count.result.value}, heap ${(heap.usedSize / 2 ** 20).toFixed(1)} MiB, RSS ${rss.toFixed(1)} MiB`,
      );
    } finally {
      inspect.close();
    }
  } finally {
    await dispatcher.close();
    await serve.stop();
  }
}

try {
  for (let round = 0; round < rounds; round++) {
    const names = Object.keys(checkouts);
    for (const name of round % 2 === 0 ? names : names.reverse()) await measure(name);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${rounds} rounds, alternating; up to ${requests} requests per round, one at a time; medians`);
console.log("| checkout | requests | timer lists | heap after GC, MiB | RSS, MiB |");
console.log("| --- | --- | --- | --- | --- |");
for (const [name, rs] of Object.entries(readings)) {
  const m = (pick: (r: Reading) => number) => median(rs.map(pick));
  console.log(
    `| ${name} | ${m((r) => r.sent)} | ${m((r) => r.timerLists)} | ${m((r) => r.heapMiB).toFixed(1)} | ${m((r) => r.rssMiB).toFixed(1)} |`,
  );
}
