import { once } from "node:events";
import { readFileSync, readlinkSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { expect, test } from "vitest";
import { parseTcpRow, socketInode } from "./proc-net-tcp.ts";

test("a socket's line is read by its fields; the header and other text are none", () => {
  const line =
    "   3: 0100007F:1F90 0100007F:D2F4 01 0000A000:00000000 01:00000014 00000000     0        0 81234 1 0000000000000000 20 4 30 10 -1";
  expect(parseTcpRow(line)).toEqual({ local: "0100007F:1F90", state: "01", txQueue: 0xa000, inode: "81234" });
  expect(
    parseTcpRow(
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
    ),
  ).toBeUndefined();
  expect(parseTcpRow("")).toBeUndefined();
  expect(socketInode("socket:[81234]")).toBe("81234");
  expect(socketInode("pipe:[81234]")).toBeUndefined();
  expect(socketInode("/dev/null")).toBeUndefined();
});

test("a connected socket of this process is found in the kernel's table by its inode", async () => {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const client: Socket = connect((server.address() as { port: number }).port, "127.0.0.1");
  await once(client, "connect");
  try {
    const fd = (client as unknown as { _handle: { fd: number } })._handle.fd;
    const inode = socketInode(readlinkSync(`/proc/self/fd/${fd}`));
    expect(inode).toMatch(/^\d+$/);
    const rows = readFileSync("/proc/net/tcp", "latin1").split("\n").slice(1).map(parseTcpRow);
    const row = rows.find((r) => r?.inode === inode);
    expect(row).toMatchObject({ state: "01", txQueue: 0 });
    const port = (client.address() as { port: number }).port;
    expect(row!.local.endsWith(`:${port.toString(16).toUpperCase().padStart(4, "0")}`)).toBe(true);
  } finally {
    client.destroy();
    server.close();
  }
});
