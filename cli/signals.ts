import type { Logger } from "../lib/log.ts";

/**
 * Resolves on the first SIGTERM or SIGINT, after logging `message` with the signal and `fields`.
 * The commands' shutdown starts from here.
 */
export function untilStopSignal(
  log: Logger,
  message: string,
  fields: Record<string, unknown> = {},
): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      log.info(message, { signal, ...fields });
      resolve(signal);
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
}
