import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The address a pod gets and how to start a process that listens on it. */
export interface PodAddress {
  ip: string;
  /**
   * The address a pod's server binds: the pod IP when pods share one network, `0.0.0.0` when the
   * pod has a network namespace of its own, where (as in a real pod) its containers also reach each
   * other on 127.0.0.1 (Knative's queue-proxy dials the user container there).
   */
  listenHost: string;
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
        return { ip, listenHost: ip, wrap: (argv) => argv };
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

const namePrefix = "snooze-pod-";
/** The shared namespace of earlier versions of this kubelet; a dead one's is still cleaned up. */
const oldNamePrefix = "snooze-pods-";

/**
 * Pod addresses on a bridge this kubelet creates (needs root and iproute2), as the CNI bridge
 * plugin gives them: the bridge holds <net>.1/24 (the node's address), and each pod gets a network
 * namespace of its own with one end of a veth pair on the bridge and its address on the other, so
 * two pods can listen on the same port and each pod's containers share its 127.0.0.1. All traffic
 * stays on this machine: the /24 is routed only to the bridge, and the whole /16 is marked
 * unreachable in the host's table so an address without a pod never falls through to the default
 * route.
 */
export async function netnsNetwork(options: NetnsOptions): Promise<PodNetwork> {
  const match = /^(\d+)\.(\d+)\.0\.0\/16$/.exec(options.cidr);
  if (!match) throw new Error(`--pod-cidr must be a /16 like 10.213.0.0/16, not ${options.cidr}`);
  const prefix16 = `${match[1]}.${match[2]}`;
  // Names carry this process id, so a later kubelet can tell a dead one's leftovers from a live one's.
  const id = process.pid;
  const tag = `sz${id.toString(36)}`;
  const bridge = `${tag}b`;
  await removeStaleNamespaces();
  await ip(["route", "replace", "unreachable", options.cidr]);
  const subnet = await freeSubnet(prefix16, id);
  const hostIP = `${prefix16}.${subnet}.1`;
  try {
    await ip(["link", "add", bridge, "type", "bridge"]);
    await ip(["addr", "add", `${hostIP}/24`, "dev", bridge]);
    await ip(["link", "set", bridge, "up"]);
    const { stdout } = await run("ip", ["route", "get", `${prefix16}.${subnet}.2`]);
    if (!stdout.includes(`dev ${bridge}`))
      throw new Error(`pod subnet is not routed to ${bridge}: ${stdout}`);
  } catch (error) {
    await ip(["link", "del", bridge]).catch(() => {});
    throw error;
  }
  const inUse = new Set<string>();
  const namespaceOf = (host: number) => `${namePrefix}${id}-${host}`;
  let lastHost = 1;
  const hostOf = (podIP: string) => Number(podIP.slice(podIP.lastIndexOf(".") + 1));
  return {
    kind: "netns",
    hostIP,
    async allocate() {
      // Round robin from the last address handed out, not the lowest free one: a pod that replaces
      // one just gone (scaled to zero and back) would otherwise get its address at once, with a new
      // veth's MAC, while the host's neighbour cache still maps the address to the old one: its
      // connections went nowhere until the entry expired (up to ~45 s; the e2e ladder test hung).
      for (let step = 0; step < 253; step++) {
        const host = 2 + ((lastHost - 2 + 1 + step) % 253);
        const podIP = `${prefix16}.${subnet}.${host}`;
        if (inUse.has(podIP)) continue;
        inUse.add(podIP);
        lastHost = host;
        const namespace = namespaceOf(host);
        const hostEnd = `${tag}h${host}`;
        const podEnd = `${tag}p${host}`;
        try {
          await ip(["netns", "add", namespace]);
          await ip(["link", "add", hostEnd, "type", "veth", "peer", "name", podEnd]);
          await ip(["link", "set", podEnd, "netns", namespace]);
          await ip(["link", "set", hostEnd, "master", bridge]);
          await ip(["link", "set", hostEnd, "up"]);
          await ip(["-n", namespace, "link", "set", podEnd, "name", "eth0"]);
          await ip(["-n", namespace, "addr", "add", `${podIP}/24`, "dev", "eth0"]);
          await ip(["-n", namespace, "link", "set", "eth0", "up"]);
          await ip(["-n", namespace, "link", "set", "lo", "up"]);
          await ip(["-n", namespace, "route", "add", "default", "via", hostIP]);
        } catch (error) {
          await ip(["netns", "del", namespace]).catch(() => {});
          await ip(["link", "del", hostEnd]).catch(() => {});
          inUse.delete(podIP);
          throw error;
        }
        return {
          ip: podIP,
          listenHost: "0.0.0.0",
          wrap: (argv) => ["ip", "netns", "exec", namespace, ...argv],
        };
      }
      throw new Error(`no pod address left in ${prefix16}.${subnet}.0/24`);
    },
    async release(podIP) {
      if (!inUse.has(podIP)) return;
      // Deleting the namespace deletes the veth pair with it.
      await ip(["netns", "del", namespaceOf(hostOf(podIP))]).catch(() => {});
      // And the host forgets the old MAC, so the address's next pod is reached at once.
      await ip(["neigh", "flush", "to", podIP, "dev", bridge]).catch(() => {});
      // Free for the next pod only once the address is really gone.
      inUse.delete(podIP);
    },
    async close() {
      for (const podIP of inUse) await ip(["netns", "del", namespaceOf(hostOf(podIP))]).catch(() => {});
      inUse.clear();
      await ip(["link", "del", bridge]).catch(() => {});
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

/** Namespaces and bridges left by kubelets that died without cleaning up (their process id is gone). */
async function removeStaleNamespaces() {
  const { stdout } = await run("ip", ["netns", "list"]);
  const dead = new Set<number>();
  for (const line of stdout.split("\n")) {
    const name = line.split(" ")[0] ?? "";
    const prefix = [namePrefix, oldNamePrefix].find((p) => name.startsWith(p));
    if (!prefix) continue;
    const pid = Number(name.slice(prefix.length).split("-")[0]);
    if (!Number.isInteger(pid) || alive(pid)) continue;
    dead.add(pid);
    await ip(["netns", "del", name]).catch(() => {});
  }
  for (const pid of dead) {
    await ip(["link", "del", `sz${pid.toString(36)}b`]).catch(() => {});
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
