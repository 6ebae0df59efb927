import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { parseTcpRow, socketInode } from "../lib/proc-net-tcp.ts";

/**
 * How many listening TCP sockets on `port` are not this process's but share a local address with
 * one of its own: another process that bound the port with SO_REUSEPORT beside it (Linux lets a
 * second listener of the same user in). The activator binds its port alone first to refuse a taken
 * one, but two `snooze serve` started at the same moment can both pass that check before either
 * listens, and would then share the port, each taking a part of its connections.
 *
 * `tables` are /proc/net/tcp and /proc/net/tcp6 as text; `own` the socket inodes of this process.
 */
export function foreignListenersIn(
  port: number,
  tables: readonly string[],
  own: ReadonlySet<string>,
): number {
  const portHex = port.toString(16).toUpperCase().padStart(4, "0");
  const listening: { address: string; inode: string }[] = [];
  for (const table of tables) {
    for (const line of table.split("\n").slice(1)) {
      const row = parseTcpRow(line);
      // State 0A is TCP_LISTEN.
      if (row?.state !== "0A" || !row.local.endsWith(`:${portHex}`)) continue;
      listening.push({ address: row.local, inode: row.inode });
    }
  }
  const ours = new Set(listening.filter((l) => own.has(l.inode)).map((l) => l.address));
  return listening.filter((l) => ours.has(l.address) && !own.has(l.inode)).length;
}

/** `foreignListenersIn` for this process, read from /proc; 0 where /proc cannot say (not Linux). */
export function foreignListeners(port: number): number {
  let tables: string[];
  const own = new Set<string>();
  try {
    tables = ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((file) => {
      try {
        return [readFileSync(file, "utf8")];
      } catch {
        return []; // no IPv6 in this kernel
      }
    });
    for (const fd of readdirSync("/proc/self/fd")) {
      try {
        const inode = socketInode(readlinkSync(`/proc/self/fd/${fd}`));
        if (inode) own.add(inode);
      } catch {
        // closed since it was listed (the directory's own descriptor among them)
      }
    }
  } catch {
    return 0;
  }
  return foreignListenersIn(port, tables, own);
}
