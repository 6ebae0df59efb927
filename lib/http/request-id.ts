import type { IncomingMessage } from "node:http";

/**
 * The `x-request-id` an answer names its request by, as vLLM's `--enable-request-id-headers` does:
 * the caller's own `X-Request-Id` (or the id Snooze gave the request already, which it set there:
 * activator/request-id.ts), else a fresh one in vLLM's form. Snooze's own answers (an error it
 * writes itself) carry it as a proxied one would, so a client's `request_id` is never empty and an
 * error can be told apart from the engine's in the logs by the id the caller sees.
 */
export function requestIdOf(req: IncomingMessage | undefined): string {
  const own = req?.headers["x-request-id"];
  return typeof own === "string" && own !== "" ? own : freshRequestId();
}

/** A new request id as vLLM makes them: a uuid4 in hex. */
export function freshRequestId(): string {
  // node:crypto at first use, not at startup: an idle serve loads none (cli/loaded-modules.test.ts).
  return process.getBuiltinModule("node:crypto").randomUUID().replaceAll("-", "");
}

/**
 * A request Node's parser refused never became an `IncomingMessage`, but the caller's own
 * `X-Request-Id` may be among the bytes it read (a 431's headers are mostly there): named back if
 * it is a plain token, else a fresh id, so the refusal still carries one.
 */
export function requestIdInRaw(raw: Buffer | undefined): string {
  const own = raw?.toString("latin1").match(/\r?\nx-request-id:[ \t]*([!-~]{1,256})[ \t]*\r?\n/i)?.[1];
  return own ?? freshRequestId();
}
