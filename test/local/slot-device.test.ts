import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, startWith, until } from "../helpers/local-snooze.ts";

/**
 * A slot's `device` in local mode: the GPU its members' engines run on. Found by an outside
 * tester: the setting was taken and used only on Kubernetes, so locally every engine saw every GPU
 * (vLLM then takes the first), and two slots named for two GPUs put their residents on one.
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/** An engine that prints the GPUs it was given, then serves. */
const engine = [
  "process.stdout.write('CUDA_VISIBLE_DEVICES=' + process.env.CUDA_VISIBLE_DEVICES + '\\n');",
  "require('node:http').createServer((req, res) => {",
  "  if (req.url === '/health') return res.end();",
  "  req.resume(); req.on('end', () => {",
  "    res.setHeader('content-type', 'application/json');",
  "    res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }] }));",
  "  });",
  "}).listen(Number(process.argv[1]), '127.0.0.1');",
].join("\n");
const command = JSON.stringify([process.execPath, "-e", engine, "${PORT}"]);
const settings = (device: string) => `
slots:
  gpu0: { device: "${device}" }
  gpu1: { device: "GPU-4a1b" }
models:
  a:
    slot: gpu0
    sleep: false
    env: { CUDA_VISIBLE_DEVICES: "0,1" }
    command: ${command}
  b:
    slot: gpu1
    sleep: false
    command: ${command}
  free:
    sleep: false
    env: { CUDA_VISIBLE_DEVICES: "3" }
    command: ${command}
`;

const devicesOf = async (model: string) => {
  const answer = await fetch(`${snooze!.url}/v1/chat/completions`, chat(model));
  expect(answer.status, await answer.text()).toBe(200);
  const { replicas } = (await (await fetch(`${snooze!.url}/snooze/v1/models/${model}/logs`)).json()) as {
    replicas: { running: boolean; lines: string[] }[];
  };
  return replicas.filter((r) => r.running).flatMap((r) => r.lines);
};

test("each member's engine runs on its slot's device (CUDA_VISIBLE_DEVICES), over the model's own env", async () => {
  snooze = await startWith(settings("1"));
  expect(await devicesOf("a")).toEqual(["CUDA_VISIBLE_DEVICES=1"]);
  expect(await devicesOf("b")).toEqual(["CUDA_VISIBLE_DEVICES=GPU-4a1b"]);
  // A model in no slot keeps what its env says.
  expect(await devicesOf("free")).toEqual(["CUDA_VISIBLE_DEVICES=3"]);
});

test("a reload that changes a slot's device restarts its members' engines on the new one", async () => {
  snooze = await startWith(settings("1"));
  expect(await devicesOf("a")).toEqual(["CUDA_VISIBLE_DEVICES=1"]);
  const reload = snooze.models!.apply(parseConfig(settings("2"), "test.yaml"));
  expect(reload.result).toBe("applied");
  await snooze.models!.settled();
  await until(async () => (await devicesOf("a")).includes("CUDA_VISIBLE_DEVICES=2"), 10_000, "a on GPU 2");
});

test("warned of at load: a model's env naming another GPU, and a device CUDA cannot read", () => {
  const warnings = parseConfig(settings("0:1"), "test.yaml").warnings ?? [];
  expect(warnings.join("\n")).toContain("models.a.env.CUDA_VISIBLE_DEVICES: replaced by its slot's device");
  expect(warnings.join("\n")).toContain('slots.gpu0.device: "0:1" is the NVIDIA container runtime\'s form');
  expect(warnings.join("\n")).not.toContain("models.free");
});
