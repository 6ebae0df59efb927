import { readdirSync, readFileSync } from "node:fs";
import { afterEach, expect, test, vi } from "vitest";
import { LocalPlatform } from "../../autoscaler/local/platform.ts";
import { freePort } from "../../lib/free-port.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/load.ts";

// A start that waits (for its port) may outlive what asked for it: the model can be removed
// meanwhile. Real processes: what matters is whether a process was begun that nobody lists.

let platform: LocalPlatform | undefined;
afterEach(async () => {
  await platform?.close();
  platform = undefined;
});

/** The pids whose command line holds `marker` (an engine's guard carries its engine's arguments). */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").includes(marker))
        found.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

test.skipIf(process.platform !== "linux")(
  "a model removed while its new engine's start waits for the old engine to leave its fixed port: no engine is begun for it (found by reading the code)",
  async () => {
    // The start resumed once the old engine was gone and spawned an engine into the model the
    // platform had forgotten: listed nowhere, stopped by nothing but Snooze's exit, holding the
    // fixed port (a model added again with it would find it taken).
    const port = await freePort();
    const marker = `start-abandoned-${process.pid}-${Date.now()}`;
    const config = (arg: string) =>
      parseConfig(`
models:
  a:
    command: [node, -e, "setTimeout(() => {}, 60000)", "${arg}"]
    port: ${port}
`).models.get("a")!;
    platform = new LocalPlatform([config("old")], silentLogger, { stopGraceMs: 1_000 });
    await platform.scale("a", 0, 1, []);
    platform.setModel(config(marker), { restart: true }); // the engine running is outdated now
    const starting = platform.scale("a", 1, 2, []); // waits until the outdated engine left the port
    await vi.waitFor(() => expect(platform!.replicaSet("a")?.scale).toBe(2));
    await Promise.all([starting, platform.removeModel("a")]);
    const orphans = processesWith(marker);
    for (const pid of orphans) process.kill(-pid, "SIGKILL"); // the guard leads its engine's group
    expect(orphans).toEqual([]);
    expect(platform.replicaSet("a")).toBeUndefined();
  },
);
