/**
 * vLLM's routes that Snooze never passes to an engine, and what a client calling one is told
 * instead of a bare "No route". A vLLM server under Snooze serves them on its own port: the
 * engine-private API (dev mode, which sleep mode needs: sleep, wake, RPC, caches, profiling, and
 * `/v1/load_lora_adapter`), which only Snooze may drive, and routes about one engine process
 * (`/health`, `/version`...), which say nothing of a model that may have no engine at all.
 */
const controlled =
  "Snooze puts engines to sleep and wakes them itself: POST /snooze/v1/models/{model}/sleep or /wake (`snooze sleep|wake <model>`).";
const privateAdvice = "it is vLLM's engine-private API, which Snooze never passes to an engine";

const advice: ReadonlyMap<string, string> = new Map([
  ...[
    "/sleep",
    "/wake_up",
    "/is_sleeping",
    "/collective_rpc",
    "/reset_prefix_cache",
    "/reset_mm_cache",
    "/reset_encoder_cache",
    "/start_profile",
    "/stop_profile",
    "/pause",
    "/resume",
    "/is_paused",
    "/scale_elastic_ep",
    "/is_scaling_elastic_ep",
    "/server_info",
  ].map((path) => [path, `${privateAdvice}. ${controlled}`] as const),
  ...["/v1/load_lora_adapter", "/v1/unload_lora_adapter"].map(
    (path) =>
      [
        path,
        `${privateAdvice}: an adapter loaded into one engine would be gone at its next start, and other replicas would lack it. Name adapters in the model's command (vLLM's --lora-modules).`,
      ] as const,
  ),
  ...["/health", "/ping", "/version", "/load", "/tokenizer_info"].map(
    (path) =>
      [
        path,
        "it is about one engine process, which a model under Snooze may not have running. Snooze answers for itself at GET /healthz and /readyz, and for its models at GET /v1/models and /snooze/v1/models.",
      ] as const,
  ),
]);

/** Why a vLLM route is not passed on (for the client's 404), if `path` is one Snooze keeps back. */
export function engineOwnRoute(path: string): string | undefined {
  return advice.get(path);
}
