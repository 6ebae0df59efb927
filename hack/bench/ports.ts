/** Free loopback ports and waiting for a listener. */
import { setTimeout as delay } from "node:timers/promises";

import { portInUse } from "../../lib/free-port.ts";

export { freePort } from "../../lib/free-port.ts";

export const host = "127.0.0.1";

/** Resolves once `port` accepts connections; fails after `timeoutMs` or when `gaveUp()` says so. */
export async function waitForPort(port: number, timeoutMs: number, gaveUp: () => boolean = () => false) {
  const deadline = Date.now() + timeoutMs;
  while (!(await portInUse(port, host))) {
    if (gaveUp()) throw new Error(`the process exited before listening on ${port}`);
    if (Date.now() > deadline) throw new Error(`nothing listened on ${port} within ${timeoutMs}ms`);
    await delay(20);
  }
}
