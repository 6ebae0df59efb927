/**
 * Error codes of this process running out of something (file descriptors, ports, buffers, memory),
 * not of the engine it called: such a call never reached the engine, and says nothing about it.
 */
export const localResourceCodes: ReadonlySet<string> = new Set([
  "EMFILE",
  "ENFILE",
  "ENOBUFS",
  "ENOMEM",
  "EADDRNOTAVAIL",
]);
