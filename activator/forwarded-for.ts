/**
 * The `X-Forwarded-For` an engine is sent: the client's own list (a gateway in front of Snooze
 * writes one), with the address of the peer Snooze took the request from added at its end, as
 * proxies do (Knative's activator, through Go's ReverseProxy; Envoy). vLLM's server (uvicorn)
 * trusts the header from a proxy at 127.0.0.1 by default, where `snooze serve` reaches its engines
 * from, and names the client by the last address in it that is not a trusted proxy's: passed on
 * untouched, the header let a remote client name itself whatever it liked in the engine's log.
 * `listed` is the client's header (several are one list, joined by Node); one the client's
 * `Connection` header named was dropped before (hop-headers.ts). `peer` is undefined once the
 * client has gone.
 */
export function forwardedFor(listed: string | undefined, peer: string | undefined): string | undefined {
  const before = listed?.trim();
  if (peer === undefined) return before || undefined;
  return before ? `${before}, ${peer}` : peer;
}
