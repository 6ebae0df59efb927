import { afterEach, expect, test, vi } from "vitest";
import { LocalPlatform } from "../../autoscaler/local/platform.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/load.ts";

// The pick of a free port is random over some 12,000 ports: made the smallest of two here, so two
// engines that both ask while neither listens yet meet every time, not once in thousands of starts.
const candidates = [47_901, 47_902];
vi.mock("../../lib/free-port.ts", async (original) => ({
  ...(await original<typeof import("../../lib/free-port.ts")>()),
  freePort: async (_host?: string, avoid: ReadonlySet<number> = new Set()) => {
    const port = candidates.find((p) => !avoid.has(p));
    if (port === undefined) throw new Error("no free port");
    return port;
  },
}));

let platform: LocalPlatform | undefined;
afterEach(async () => {
  await platform?.close();
  platform = undefined;
});

test("two engines that do not listen yet (loading) are never given one port: the second gets another (found by an outside tester)", async () => {
  // An engine that loads for minutes before it binds its port (vLLM) left that port looking free:
  // a second model's start could be given it, and whichever engine bound it first answered the
  // other model's readiness checks and got its traffic, while the other failed to bind.
  const loading = `[node, -e, "setTimeout(() => {}, 60000)", "\${PORT}"]`;
  const config = parseConfig(`
models:
  a:
    command: ${loading}
  b:
    command: ${loading}
`);
  platform = new LocalPlatform(config.models.values(), silentLogger, { stopGraceMs: 1_000 });
  await Promise.all([platform.scale("a", 0, 1, []), platform.scale("b", 0, 1, [])]);
  const address = (model: string) => platform!.replicaSet(model)?.replicas[0]?.address;
  await vi.waitFor(() => expect(address("a") && address("b")).toBeTruthy(), { timeout: 5_000 });
  expect(address("a")).not.toBe(address("b"));
  expect([address("a"), address("b")].sort()).toEqual(["127.0.0.1:47901", "127.0.0.1:47902"]);
});

test("a start whose engine cannot be spawned (E2BIG) keeps no port: the next start is given the one it picked", async () => {
  // A picked port is kept from other picks until its engine is listed; a start that throws before
  // that lets go of it, or every later engine would be kept off it for as long as Snooze runs.
  const loading = `[node, -e, "setTimeout(() => {}, 60000)", "\${PORT}"]`;
  const config = parseConfig(`
models:
  huge:
    command: [node, -e, "0", "\${PORT}", "${"x".repeat(300_000)}"]
  b:
    command: ${loading}
`);
  platform = new LocalPlatform(config.models.values(), silentLogger, { stopGraceMs: 1_000 });
  await expect(platform.scale("huge", 0, 1, [])).rejects.toThrow(/could not run .*E2BIG/);
  await platform.scale("b", 0, 1, []);
  expect(platform.replicaSet("b")?.replicas[0]?.address).toBe("127.0.0.1:47901");
});
