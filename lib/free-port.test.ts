import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { freePort, freePortRange, portInUse } from "./free-port.ts";

const ephemeralLow = (() => {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    return undefined;
  }
})();

function bind(port: number): Promise<() => Promise<void>> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(() => new Promise((done) => server.close(() => done()))));
  });
}

describe("freePort", () => {
  it.runIf(ephemeralLow !== undefined && ephemeralLow > 11_000)(
    "looks below the kernel's ephemeral range, which outgoing connections draw from",
    async () => {
      for (let i = 0; i < 20; i++) {
        const port = await freePort();
        expect(port).toBeLessThan(ephemeralLow!);
        expect(port).toBeGreaterThanOrEqual(10_000);
      }
    },
  );

  it("gives a port that can be bound and that nothing answers on", async () => {
    const port = await freePort();
    expect(await portInUse(port)).toBe(false);
    const close = await bind(port);
    expect(await portInUse(port)).toBe(true);
    await close();
  });

  it.runIf(ephemeralLow !== undefined && ephemeralLow > 11_000)(
    "never gives a port kept for someone else (a cold model's fixed port)",
    async () => {
      // Found by an outside tester: an engine could be given the fixed port of a model that was
      // cold, whose start then failed saying another process held its port.
      const from = Math.max(10_000, ephemeralLow! - 12_000);
      // The first pick lands on `from`, which is kept.
      const random = vi.spyOn(Math, "random").mockReturnValueOnce(0);
      try {
        expect(await freePort("127.0.0.1", new Set([from]))).not.toBe(from);
      } finally {
        random.mockRestore();
      }
    },
  );

  it("gives consecutive ports, each of which can be bound", async () => {
    const base = await freePortRange(3);
    const closers = [await bind(base), await bind(base + 1), await bind(base + 2)];
    await Promise.all(closers.map((close) => close()));
  });
});
