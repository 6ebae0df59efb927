/**
 * Linux's tables of TCP sockets, /proc/net/tcp and /proc/net/tcp6 (proc(5)): one line per socket
 * after a header, `sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout
 * inode …`, numbers in hexadecimal but the inode. A socket is found there by its inode, which the
 * link /proc/self/fd/<fd> names (`socket:[12345]`).
 */
export interface TcpSocketRow {
  /** `ADDRESS:PORT` in the kernel's hexadecimal, as the table writes it (`0100007F:1F90`). */
  local: string;
  /** The TCP state in hexadecimal: `0A` listening, `01` established, … */
  state: string;
  /** Bytes written to the peer and not acknowledged yet. */
  txQueue: number;
  inode: string;
}

/** One line of the table, or undefined for the header and anything that is no socket's line. */
export function parseTcpRow(line: string): TcpSocketRow | undefined {
  const fields = line.trim().split(/\s+/);
  const [local, state, queues, inode] = [fields[1], fields[3], fields[4], fields[9]];
  if (local === undefined || state === undefined || queues === undefined || inode === undefined)
    return undefined;
  const txQueue = Number.parseInt(queues.split(":")[0] ?? "", 16);
  if (Number.isNaN(txQueue) || !/^\d+$/.test(inode)) return undefined;
  return { local, state, txQueue, inode };
}

/** The inode of the socket a /proc/<pid>/fd/<fd> link names (`socket:[12345]`), else undefined. */
export function socketInode(link: string): string | undefined {
  return /^socket:\[(\d+)\]$/.exec(link)?.[1];
}
