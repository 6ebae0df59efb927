import { closeSync, constants, fstatSync, openSync, readSync, type Stats, statSync } from "node:fs";

/**
 * The largest PEM file read (a certificate chain, a private key, a CA bundle): a system's whole CA
 * bundle is some 200 KiB. Kubeconfigs, which embed them, are held to it too.
 */
export const maxPemFileBytes = 4 * 1024 * 1024;

/** The largest bearer token file read: a ServiceAccount token is some 1 KiB. */
export const maxTokenFileBytes = 64 * 1024;

/**
 * The bytes of a small regular file a flag names (a token, a key), read without blocking: a path
 * that is not a regular file (a named pipe, a device such as /dev/zero, a directory) or is larger
 * than `maxBytes` is refused with an Error saying what it is. A plain readFileSync of a named pipe
 * blocks the process for good, deaf to SIGTERM (its handler never runs), and of /dev/zero or
 * /dev/urandom fills memory until the kernel kills it. The path is looked at before it is opened
 * (opening a named pipe waits for a writer), opened without blocking and looked at again (it may
 * have been swapped meanwhile), and read no further than the limit.
 */
export function readSmallFileSync(path: string, maxBytes: number): Buffer {
  refuse(statSync(path), maxBytes);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    refuse(fstatSync(fd), maxBytes);
    // One byte past the limit tells a file at the limit from one that grew beyond it.
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    for (;;) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
      if (length > maxBytes) throw new Error(`the file grew past ${maxBytes} bytes as it was read`);
    }
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

function refuse(stats: Stats, maxBytes: number): void {
  const kind = notRegular(stats);
  if (kind) throw new Error(`it is ${kind}, not a regular file`);
  if (stats.size > maxBytes)
    throw new Error(`the file is ${stats.size} bytes; it may be at most ${maxBytes} bytes`);
}

/** What a path is when it is not a regular file (`a directory`, `a named pipe (FIFO)`, ...). */
export function notRegular(stats: Stats): string | undefined {
  if (stats.isFile()) return undefined;
  return stats.isDirectory()
    ? "a directory"
    : stats.isFIFO()
      ? "a named pipe (FIFO)"
      : stats.isCharacterDevice() || stats.isBlockDevice()
        ? "a device"
        : stats.isSocket()
          ? "a socket"
          : "not a regular file";
}
