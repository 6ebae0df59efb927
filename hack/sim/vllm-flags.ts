/**
 * Every flag `vllm serve` takes, and how argparse reads each, so that a command written for vLLM
 * starts `snooze sim` unchanged (the simulator implements some of them; vllm-args.ts reads the rest).
 *
 * Which vLLM: the engine flags are those of `EngineArgs.add_cli_args` and
 * `AsyncEngineArgs.add_cli_args` in vLLM 0.11 (vllm/engine/arg_utils.py; the deprecated ones
 * that release still takes are kept), the server flags those of `make_arg_parser` and
 * `FrontendArgs` as a recent vLLM main branch defines them (vllm/entrypoints/openai/cli_args.py).
 * A flag of another release may be missing: add it here, under the kind argparse gives it.
 *
 * Kinds, as vLLM's `get_kwargs` derives them from a config field's type:
 * - `value`: one value, `--dtype bfloat16` or `--dtype=bfloat16` (str, int, float, Literal, JSON);
 * - `values`: one or more words (a list field, argparse's `nargs="+"`): `--ignore-patterns a b`;
 * - `optional-value`: a value when the next word is not a flag (`nargs="?"`);
 * - `on-off`: no value, with a `--no-` form (a bool field, `BooleanOptionalAction`);
 * - `switch`: no value and no `--no-` form (`action="store_true"`);
 * - an object with `unsupported`: a flag the simulator refuses, because ignoring it would change
 *   what a client sees (the reason says what).
 */
export type VllmFlagKind =
  | "value"
  | "values"
  | "optional-value"
  | "on-off"
  | "switch"
  | { unsupported: string };

const value = [
  // ModelConfig
  "model",
  "runner",
  "convert",
  "task",
  "tokenizer",
  "tokenizer-mode",
  "dtype",
  "seed",
  "hf-config-path",
  "allowed-local-media-path",
  "revision",
  "code-revision",
  "rope-scaling",
  "rope-theta",
  "tokenizer-revision",
  "max-model-len",
  "quantization",
  "max-logprobs",
  "logprobs-mode",
  "config-format",
  "hf-overrides",
  "pooler-config",
  "override-pooler-config",
  "logits-processor-pattern",
  "generation-config",
  "override-generation-config",
  "model-impl",
  "override-attention-dtype",
  "io-processor-plugin",
  // LoadConfig
  "load-format",
  "download-dir",
  "safetensors-load-strategy",
  "model-loader-extra-config",
  "pt-load-map-location",
  // StructuredOutputsConfig (the guided-decoding ones are deprecated; their bools take a value)
  "reasoning-parser",
  "guided-decoding-backend",
  "guided-decoding-disable-fallback",
  "guided-decoding-disable-any-whitespace",
  "guided-decoding-disable-additional-properties",
  // ParallelConfig
  "distributed-executor-backend",
  "pipeline-parallel-size",
  "tensor-parallel-size",
  "decode-context-parallel-size",
  "data-parallel-size",
  "data-parallel-rank",
  "data-parallel-start-rank",
  "data-parallel-size-local",
  "data-parallel-address",
  "data-parallel-rpc-port",
  "data-parallel-backend",
  "all2all-backend",
  "dbo-decode-token-threshold",
  "dbo-prefill-token-threshold",
  "eplb-config",
  "expert-placement-strategy",
  "num-redundant-experts",
  "eplb-window-size",
  "eplb-step-interval",
  "max-parallel-loading-workers",
  "worker-cls",
  "worker-extension-cls",
  // CacheConfig
  "block-size",
  "gpu-memory-utilization",
  "kv-cache-memory-bytes",
  "swap-space",
  "kv-cache-dtype",
  "num-gpu-blocks-override",
  "prefix-caching-hash-algo",
  "cpu-offload-gb",
  "mamba-cache-dtype",
  "mamba-ssm-cache-dtype",
  "mamba-block-size",
  // MultiModalConfig
  "limit-mm-per-prompt",
  "media-io-kwargs",
  "mm-processor-kwargs",
  "mm-processor-cache-gb",
  "mm-processor-cache-type",
  "mm-shm-cache-max-object-size-mb",
  "mm-encoder-tp-mode",
  "mm-encoder-attn-backend",
  "video-pruning-rate",
  // LoRAConfig
  "max-loras",
  "max-lora-rank",
  "lora-extra-vocab-size",
  "lora-dtype",
  "max-cpu-loras",
  "default-mm-loras",
  // ObservabilityConfig
  "show-hidden-metrics-for-version",
  "otlp-traces-endpoint",
  // SchedulerConfig
  "max-num-batched-tokens",
  "max-num-seqs",
  "max-num-partial-prefills",
  "max-long-partial-prefills",
  "long-prefill-token-threshold",
  "num-lookahead-slots",
  "scheduling-policy",
  "scheduler-cls",
  // CompilationConfig and VllmConfig
  "max-cudagraph-capture-size",
  "speculative-config",
  "kv-transfer-config",
  "kv-events-config",
  "compilation-config",
  "additional-config",
  "structured-outputs-config",
  // make_arg_parser
  "api-server-count",
  // BaseFrontendArgs
  "chat-template",
  "chat-template-content-format",
  "default-chat-template-kwargs",
  "response-role",
  "tool-call-parser",
  "tool-parser-plugin",
  "tool-server",
  "log-config-file",
  "max-log-len",
  "cohere-format",
  "fingerprint-mode",
  "fingerprint-value",
  // FrontendArgs
  "host",
  "port",
  "data-parallel-supervisor-port",
  "dp-supervisor-probe-interval-s",
  "dp-supervisor-probe-timeout-s",
  "dp-supervisor-probe-failure-threshold",
  "uvicorn-log-level",
  "disable-access-log-for-endpoints",
  "allowed-origins",
  "allowed-methods",
  "allowed-headers",
  "ssl-cert-reqs",
  "ssl-ciphers",
  "root-path",
  "middleware",
  "h11-max-incomplete-event-size",
  "h11-max-header-count",
];

const values = [
  "served-model-name",
  "allowed-media-domains",
  "logits-processors",
  "ignore-patterns",
  "collect-detailed-traces",
  "cudagraph-capture-sizes",
  "cuda-graph-sizes",
  "lora-modules",
  "api-key",
];

const onOff = [
  // Engine
  "trust-remote-code",
  "enforce-eager",
  "disable-sliding-window",
  "disable-cascade-attn",
  "skip-tokenizer-init",
  "enable-prompt-embeds",
  "enable-sleep-mode",
  "use-tqdm-on-load",
  "data-parallel-hybrid-lb",
  "enable-expert-parallel",
  "enable-dbo",
  "disable-nccl-for-dp-synchronization",
  "enable-eplb",
  "eplb-log-balancedness",
  "ray-workers-use-nsight",
  "disable-custom-all-reduce",
  "enable-prefix-caching",
  "calculate-kv-scales",
  "kv-sharing-fast-prefill",
  "enable-mm-embeds",
  "interleave-mm-strings",
  "skip-mm-profiling",
  "enable-lora",
  "fully-sharded-loras",
  "enable-chunked-prefill",
  "disable-chunked-mm-input",
  "disable-hybrid-kv-cache-manager",
  "async-scheduling",
  "enable-log-requests",
  "disable-log-requests",
  // Frontend
  "trust-request-chat-template",
  "return-tokens-as-token-ids",
  "enable-auto-tool-choice",
  "exclude-tools-when-tool-choice-none",
  "enable-prompt-tokens-details",
  "enable-per-request-metrics",
  "enable-server-load-tracking",
  "enable-force-include-usage",
  "enable-tokenizer-info-endpoint",
  "enable-log-outputs",
  "enable-log-deltas",
  "cohere-is-reasoning-model",
  "log-error-stack",
  "tokens-only",
  "disable-uvicorn-access-log",
  "allow-credentials",
  "enable-ssl-refresh",
  "enable-request-id-headers",
  "disable-fastapi-docs",
  "enable-offline-docs",
  "enable-flash-late-interaction",
];

const switches = [
  "enable-multimodal-encoder-data-parallel",
  "disable-mm-preprocessor-cache",
  "disable-log-stats",
  "aggregate-engine-logging",
];

const tls = "the simulator serves plain HTTP, so a client expecting TLS could not connect";
const unsupported: Record<string, string> = {
  config: "the simulator does not read vLLM's YAML file of flags: give them on the command line",
  headless: "a headless vLLM serves no API, which is all the simulator has",
  grpc: "the simulator serves HTTP only, not vLLM's gRPC server",
  uds: "the simulator listens on --host and --port, not on a Unix socket",
  "ssl-keyfile": tls,
  "ssl-certfile": tls,
  "ssl-ca-certs": tls,
};

/** Every long flag of `vllm serve`, without its dashes, and how it is read. */
export const vllmFlags: ReadonlyMap<string, VllmFlagKind> = new Map<string, VllmFlagKind>([
  ...value.map((name) => [name, "value"] as const),
  ...values.map((name) => [name, "values"] as const),
  ["hf-token", "optional-value"],
  ...onOff.map((name) => [name, "on-off"] as const),
  ...switches.map((name) => [name, "switch"] as const),
  ...Object.entries(unsupported).map(([name, reason]) => [name, { unsupported: reason }] as const),
]);

/** vLLM's short spellings (one dash, all of flags that take a value) and the flag each stands for. */
export const vllmShortFlags: ReadonlyMap<string, string> = new Map([
  ["q", "quantization"],
  ["pp", "pipeline-parallel-size"],
  ["tp", "tensor-parallel-size"],
  ["dcp", "decode-context-parallel-size"],
  ["dp", "data-parallel-size"],
  ["dpn", "data-parallel-rank"],
  ["dpr", "data-parallel-start-rank"],
  ["dpl", "data-parallel-size-local"],
  ["dpa", "data-parallel-address"],
  ["dpp", "data-parallel-rpc-port"],
  ["dpb", "data-parallel-backend"],
  ["O", "compilation-config"],
  ["asc", "api-server-count"],
]);
