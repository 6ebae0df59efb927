import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";

/**
 * lib/zod-locales-hook.ts changes what zod's `locales` namespace holds in a `snooze` process, and
 * nothing else: the same settings files give the same messages with it as without it (vitest
 * imports zod without the hook, so a real Node process is run each way).
 */
const hook = fileURLToPath(new URL("./zod-locales-hook.ts", import.meta.url));
const settings = new URL("./settings/index.ts", import.meta.url).href;
const snapshot = new URL("./learning-snapshot.ts", import.meta.url).href;

const badFiles = [
  "models:\n  a:\n    command: 5\n",
  "models:\n  a:\n    command: []\n",
  "models:\n  a:\n    command: [x, '${PORT}']\n    sleepAfter: soon\n    hostMemory: -3\n    port: 70000\n",
  "defaults:\n  command: [x]\n  sleepAftr: 1m\nmodels: {}\n",
  "slots:\n  s:\n    policy: lifo\nmodels:\n  a:\n    command: [x, '${PORT}']\n    slot: t\n",
  "models: 3\n",
  "eventSink: ftp://host/x\nmodels:\n  a:\n    command: [x, '${PORT}']\n    aliases: [1, {}]\n",
];

// What a process sees: zod's locales, the messages of files that fail to load, zod's own message
// for a plain schema, and a learning snapshot that does not parse.
const script = `
  const { z } = await import("zod");
  const { parseConfig } = await import(${JSON.stringify(settings)});
  const snapshot = await import(${JSON.stringify(snapshot)});
  const messages = ${JSON.stringify(badFiles)}.map((text) => {
    try { parseConfig(text, "bad.yaml"); return "loaded"; } catch (error) { return error.message; }
  });
  const plain = z.object({ n: z.number().int().min(1), s: z.enum(["a", "b"]), u: z.url() }).safeParse({ n: 1.5, s: "c", u: "x" });
  const snapshotParse = Object.values(snapshot).filter((v) => typeof v?.safeParse === "function")
    .map((schema) => JSON.stringify(schema.safeParse({ version: "x", models: 3 }).error?.issues));
  console.log(JSON.stringify({ locales: Object.keys(z.locales), messages, plain: plain.error.issues, snapshotParse }));
`;

function run(withHook: boolean): {
  locales: string[];
  messages: string[];
  plain: { message: string }[];
  snapshotParse: string[];
} {
  const args = [...(withHook ? ["--import", hook] : []), "--input-type=module", "-e", script];
  return JSON.parse(execFileSync(process.execPath, args, { encoding: "utf8" }));
}

test("zod with English alone of its 63 locales gives the same messages", { timeout: 20_000 }, () => {
  const without = run(false);
  const withHook = run(true);
  expect(without.locales.length).toBeGreaterThan(60);
  expect(withHook.locales).toEqual(["en"]);
  expect(withHook.messages).toEqual(without.messages);
  expect(withHook.messages.filter((m) => m === "loaded")).toEqual([]);
  expect(withHook.plain).toEqual(without.plain);
  expect(withHook.plain.map((i) => i.message)).toContain('Invalid option: expected one of "a"|"b"');
  expect(withHook.snapshotParse).toEqual(without.snapshotParse);
});
