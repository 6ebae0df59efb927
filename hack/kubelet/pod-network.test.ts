import { execFileSync } from "node:child_process";
import { connect } from "node:net";
import { describe, expect, test } from "vitest";
import { netnsNetwork } from "./pod-network.ts";

function hasIproute(): boolean {
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The host's neighbour entry for `ip` ("" when there is none). */
const neighbour = (ip: string) =>
  execFileSync("ip", ["neigh", "show", "to", ip], { encoding: "utf8" }).trim();

/** Resolves once a TCP connection to `ip` is refused: by then the host has the pod's MAC. */
const knock = (ip: string) =>
  new Promise<void>((resolve) => {
    const socket = connect({ host: ip, port: 9 });
    socket.once("connect", () => socket.destroy());
    socket.once("close", () => resolve());
    socket.once("error", () => {});
  });

// Needs root and iproute2, as the stand-in kubelet's --pod-network netns does. The /16 is the
// kubelet's default: the network takes a /24 of it that no interface uses, beside a live kubelet's.
describe.skipIf(process.getuid?.() !== 0 || !hasIproute())("netnsNetwork", () => {
  test("a pod replacing one just gone gets another address, and the host keeps no neighbour entry for the old one", async () => {
    const network = await netnsNetwork({ cidr: "10.213.0.0/16" });
    try {
      const first = await network.allocate();
      await knock(first.ip);
      expect(neighbour(first.ip)).toContain("lladdr");
      await network.release(first.ip);
      expect(neighbour(first.ip)).toBe("");
      const second = await network.allocate();
      expect(second.ip).not.toBe(first.ip);
      await network.release(second.ip);
    } finally {
      await network.close();
    }
  });
});
