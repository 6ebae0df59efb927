import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The address a pod gets and how to start a process that listens on it. */
export interface PodAddress {
  ip: string;
  /** Wraps an argv so the process runs where `ip` is reachable (inside the pod network). */
  wrap(argv: string[]): string[];
}

/** Hands out one address per pod. */
export interface PodNetwork {
  kind: "loopback" | "netns";
  /** The node's own address (status.hostIP). */
  hostIP: string;
  allocate(): Promise<PodAddress>;
  release(ip: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Pod addresses from 127.0.0.0/8: needs no privileges, and the apiserver accepts loopback pod IPs,
 * but EndpointSlice validation refuses them, so Services never get endpoints in this mode.
 */
export function loopbackNetwork(): PodNetwork {
  const inUse = new Set<string>();
  let next = 0;
  return {
    kind: "loopback",
    hostIP: "127.0.0.1",
    async allocate() {
      // 127.1.0.2 upward: leaves 127.0.0.1 (the control plane) alone.
      for (let i = 0; i < 65_000; i++) {
        const n = ((next + i) % 65_000) + 2;
        const ip = `127.1.${Math.floor(n / 256)}.${n % 256}`;
        if (n % 256 === 0 || n % 256 === 255 || inUse.has(ip)) continue;
        inUse.add(ip);
        next = n - 1;
        return { ip, wrap: (argv) => argv };
      }
      throw new Error("no loopback pod address left");
    },
    async release(ip) {
      inUse.delete(ip);
    },
    async close() {},
  };
}

export interface NetnsOptions {
  /** A /16 to carve this kubelet's /24 from, e.g. "10.213.0.0/16". */
  cidr: string;
}

const namePrefix = "snooze-pods-";

/**
 * Pod addresses in a network namespace this kubelet creates (needs root and iproute2): one veth
 * pair, the host end holds <net>.1/24, the namespace end holds one /32 per pod, so each pod
 * has its own routable IP that EndpointSlices accept. All traffic stays on this machine: the /24
 * is routed only to the veth, and the whole /16 is marked unreachable in the host's table so an
 * address without a pod never falls through to the default route.
 */
export async function netnsNetwork(options: NetnsOptions): Promise<PodNetwork> {
  const match = /^(\d+)\.(\d+)\.0\.0\/16$/.exec(options.cidr);
  if (!match) throw new Error(`--pod-cidr must be a /16 like 10.213.0.0/16, not ${options.cidr}`);
  const prefix16 = `${match[1]}.${match[2]}`;
  // Names carry this process id, so a later kubelet can tell a dead one's leftovers from a live one's.
  const id = process.pid;
  const namespace = `${namePrefix}${id}`;
  const hostIf = `snzh${id.toString(36)}`;
  const podIf = `snzp${id.toString(36)}`;
  await removeStaleNamespaces();
  await ip(["route", "replace", "unreachable", options.cidr]);
  const subnet = await freeSubnet(prefix16, id);
  const hostIP = `${prefix16}.${subnet}.1`;
  try {
    await ip(["netns", "add", namespace]);
    await ip(["link", "add", hostIf, "type", "veth", "peer", "name", podIf]);
    await ip(["link", "set", podIf, "netns", namespace]);
    await ip(["addr", "add", `${hostIP}/24`, "dev", hostIf]);
    await ip(["link", "set", hostIf, "up"]);
    await ip(["-n", namespace, "link", "set", "lo", "up"]);
    await ip(["-n", namespace, "link", "set", podIf, "up"]);
    // Pod addresses are /32s (deleting the first of several /24 addresses would take the rest with
    // it), so the namespace needs its own route to the host end.
    await ip(["-n", namespace, "route", "add", `${prefix16}.${subnet}.0/24`, "dev", podIf, "scope", "link"]);
    const { stdout } = await run("ip", ["route", "get", `${prefix16}.${subnet}.2`]);
    if (!stdout.includes(`dev ${hostIf}`))
      throw new Error(`pod subnet is not routed to ${hostIf}: ${stdout}`);
  } catch (error) {
    await ip(["netns", "del", namespace]).catch(() => {});
    await ip(["link", "del", hostIf]).catch(() => {});
    throw error;
  }
  const inUse = new Set<string>();
  return {
    kind: "netns",
    hostIP,
    async allocate() {
      for (let host = 2; host < 255; host++) {
        const podIP = `${prefix16}.${subnet}.${host}`;
        if (inUse.has(podIP)) continue;
        inUse.add(podIP);
        await ip(["-n", namespace, "addr", "add", `${podIP}/32`, "dev", podIf]);
        // The kernel drops the namespace's route to the host end when the last address goes (every
        // pod deleted); without it no pod could answer the host again. Put it back each time.
        await ip([
          "-n",
          namespace,
          "route",
          "replace",
          `${prefix16}.${subnet}.0/24`,
          "dev",
          podIf,
          "scope",
          "link",
        ]);
        return { ip: podIP, wrap: (argv) => ["ip", "netns", "exec", namespace, ...argv] };
      }
      throw new Error(`no pod address left in ${prefix16}.${subnet}.0/24`);
    },
    async release(podIP) {
      if (!inUse.has(podIP)) return;
      await ip(["-n", namespace, "addr", "del", `${podIP}/32`, "dev", podIf]).catch(() => {});
      // Free for the next pod only once the address is really gone.
      inUse.delete(podIP);
    },
    async close() {
      // Deleting the namespace deletes the veth pair (and the host route) with it.
      await ip(["netns", "del", namespace]).catch(() => {});
      await ip(["link", "del", hostIf]).catch(() => {});
    },
  };
}

async function ip(args: string[]) {
  await run("ip", args);
}

/** A /24 inside the /16 that no interface of this machine uses yet, starting at a per-process spot. */
async function freeSubnet(prefix16: string, seed: number): Promise<number> {
  const { stdout } = await run("ip", ["-4", "-o", "addr", "show"]);
  for (let i = 0; i < 254; i++) {
    const subnet = ((seed + i) % 254) + 1;
    if (!stdout.includes(` ${prefix16}.${subnet}.`)) return subnet;
  }
  throw new Error(`no free /24 left in ${prefix16}.0.0/16`);
}

/** Namespaces left by kubelets that died without cleaning up (their process id is gone). */
async function removeStaleNamespaces() {
  const { stdout } = await run("ip", ["netns", "list"]);
  for (const line of stdout.split("\n")) {
    const name = line.split(" ")[0] ?? "";
    if (!name.startsWith(namePrefix)) continue;
    const pid = Number(name.slice(namePrefix.length));
    if (!Number.isInteger(pid) || alive(pid)) continue;
    await ip(["netns", "del", name]).catch(() => {});
    await ip(["link", "del", `snzh${pid.toString(36)}`]).catch(() => {});
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
