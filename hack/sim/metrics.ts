/**
 * vLLM's Prometheus metrics for one engine, with vLLM's names, help texts,
 * labels (`model_name`, `engine`) and histogram buckets, rendered by hand: a
 * prom-client registry per engine would be heavy with hundreds of engines.
 */

const ttftBuckets = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
  80.0, 160.0, 640.0, 2560.0,
];
const itlBuckets = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
const e2eBuckets = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
  960.0, 1920.0, 7680.0,
];

/** vLLM's FinishReason values, each a `finished_reason` label of the success counter. */
export const finishReasons = ["stop", "length", "abort", "error"] as const;
export type FinishReason = (typeof finishReasons)[number];

export type SleepStateName = "awake" | "weights_offloaded" | "discard_all";

class Histogram {
  readonly buckets: readonly number[];
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.counts = buckets.map(() => 0);
  }
  observe(value: number): void {
    this.sum += value;
    this.count += 1;
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) this.counts[i]! += 1;
  }
}

/** Gauges the engine knows at scrape time. */
export interface EngineGauges {
  running: number;
  waiting: number;
  kvCacheUsage: number;
}

export class EngineMetrics {
  readonly ttft = new Histogram(ttftBuckets);
  readonly itl = new Histogram(itlBuckets);
  readonly e2e = new Histogram(e2eBuckets);
  readonly success: Record<FinishReason, number> = { stop: 0, length: 0, abort: 0, error: 0 };
  promptTokens = 0;
  generationTokens = 0;
  /** Set like vLLM's `record_sleep_state`: on each sleep and wake call, not from the actual state. */
  sleepState: Record<SleepStateName, number> = { awake: 1, weights_offloaded: 0, discard_all: 0 };

  /**
   * vLLM's `record_sleep_state(sleep, level)`: awake is 0 while asleep at any level;
   * level 1 sets weights_offloaded, level 2 discard_all, other levels neither.
   */
  recordSleepState(sleeping: boolean, level: number): void {
    this.sleepState = {
      awake: sleeping ? 0 : 1,
      weights_offloaded: sleeping && level === 1 ? 1 : 0,
      discard_all: sleeping && level === 2 ? 1 : 0,
    };
  }

  render(modelName: string, engine: string, gauges: EngineGauges): string {
    const labels = `model_name="${escapeLabel(modelName)}",engine="${engine}"`;
    const out: string[] = [];
    const gauge = (name: string, help: string, value: number) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name}{${labels}} ${num(value)}`);
    };
    const counter = (name: string, help: string, value: number) => {
      out.push(
        `# HELP ${name}_total ${help}`,
        `# TYPE ${name}_total counter`,
        `${name}_total{${labels}} ${num(value)}`,
      );
    };
    const histogram = (name: string, help: string, h: Histogram) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
      h.buckets.forEach((le, i) => {
        out.push(`${name}_bucket{${labels},le="${num(le)}"} ${num(h.counts[i]!)}`);
      });
      out.push(`${name}_bucket{${labels},le="+Inf"} ${num(h.count)}`);
      out.push(`${name}_count{${labels}} ${num(h.count)}`, `${name}_sum{${labels}} ${num(h.sum)}`);
    };

    gauge("vllm:num_requests_running", "Number of requests in model execution batches.", gauges.running);
    gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", gauges.waiting);
    out.push(
      "# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
      "# TYPE vllm:engine_sleep_state gauge",
    );
    for (const state of ["awake", "weights_offloaded", "discard_all"] as const) {
      out.push(`vllm:engine_sleep_state{${labels},sleep_state="${state}"} ${num(this.sleepState[state])}`);
    }
    gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", gauges.kvCacheUsage);
    counter("vllm:prompt_tokens", "Number of prefill tokens processed.", this.promptTokens);
    counter("vllm:generation_tokens", "Number of generation tokens processed.", this.generationTokens);
    out.push(
      "# HELP vllm:request_success_total Count of successfully processed requests.",
      "# TYPE vllm:request_success_total counter",
    );
    for (const reason of finishReasons) {
      out.push(
        `vllm:request_success_total{${labels},finished_reason="${reason}"} ${num(this.success[reason])}`,
      );
    }
    histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", this.ttft);
    histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", this.itl);
    histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", this.e2e);
    return `${out.join("\n")}\n`;
  }
}

/** Python's prometheus_client prints floats: `1.0`, `0.25`, `+Inf`. */
function num(value: number): string {
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  return Number.isInteger(value) ? value.toFixed(1) : String(value);
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}
