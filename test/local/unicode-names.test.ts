import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

// A model named in the file in one Unicode form and by a client in the other (NFD `café` from a
// macOS terminal against NFC in the file) is the same model everywhere a name is read (found by an
// outside tester: GET /v1/models/<id> and the CLI refused it).
const nfc = "café".normalize("NFC");
const nfd = "café".normalize("NFD");

let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`models:\n  ${JSON.stringify(nfc)}:\n    command: ${simCommand()}\n`);
});
afterAll(() => snooze.close(1_000));

test("GET /v1/models/<id> in the other form answers the model", async () => {
  const response = await fetch(`${snooze.url}/v1/models/${encodeURIComponent(nfd)}`);
  expect(response.status).toBe(200);
  expect(((await response.json()) as { id: string }).id).toBe(nfc);
});

test("the CLI finds the model named in the other form", async () => {
  const child = spawn(process.execPath, [resolve("bin/snooze.js"), "sleep", nfd, "--url", snooze.url], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (data: Buffer) => (stderr += data));
  const code = await new Promise((done) => child.on("close", done));
  expect(stderr).not.toContain("no model named");
  expect(code, stderr).toBe(0);
});
