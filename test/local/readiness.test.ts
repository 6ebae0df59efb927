import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, startWith } from "../helpers/local-snooze.ts";
import { scratchDir } from "../helpers/serve-process.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/** An engine that answers everything at once and tells which calls it had (`GET /calls`). */
const countingEngine = `
const http = require("node:http");
const calls = [];
http.createServer((req, res) => {
  if (req.url === "/calls") return res.end(JSON.stringify(calls));
  calls.push(req.method + " " + req.url);
  req.resume();
  req.on("end", () => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/is_sleeping") return res.end('{"is_sleeping":false}');
    if (!req.url.startsWith("/v1/")) return res.end("{}");
    res.end(JSON.stringify({ id: "c", object: "text_completion", created: 0, model: "m",
      choices: [{ index: 0, text: "hi", message: { role: "assistant", content: "hi" }, finish_reason: "stop" }] }));
  });
}).listen(Number(process.argv[2]), "127.0.0.1", () => console.log("listening"));
`;

test("a started engine is ready on the platform's own /health answer: the start asks it nothing again before its warm-up", async () => {
  const script = join(scratchDir(), "engine.cjs");
  writeFileSync(script, countingEngine);
  snooze = await startWith(`
models:
  m:
    command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(script)}, "\${PORT}"]
`);
  const answer = await fetch(`${snooze.url}/v1/chat/completions`, chat("m", { max_tokens: 1 }));
  const text = await answer.text();
  expect(answer.status, text).toBe(200);
  const [replica] = snooze.platform.replicaSet("m")?.replicas ?? [];
  const calls = (await (await fetch(`http://${replica!.address}/calls`)).json()) as string[];
  // The platform's readiness check, then the warm-up, then the request: a second /health and an
  // /is_sleeping after the first answer would each put a round trip before every cold start's answer.
  expect(calls.filter((call) => !call.startsWith("GET /metrics"))).toEqual([
    "GET /health",
    "POST /v1/completions",
    "POST /v1/chat/completions",
  ]);
});
