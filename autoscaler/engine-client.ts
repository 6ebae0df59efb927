import { context, propagation } from "@opentelemetry/api";
import { clip } from "../lib/clip.ts";
import { engineWords } from "../lib/engine-words.ts";
import { boundedText } from "../lib/http/bounded-text.ts";
import { localResourceCodes } from "../lib/http/local-resources.ts";
import { engineConnector } from "../lib/http/unasked-continue.ts";
import { type Agent, undici } from "../lib/undici.ts";
import { apiKeyFlag, vllmFlagValue } from "../lib/vllm-flag.ts";
import { sumMetric } from "./metric-sum.ts";

/**
 * Speaks vLLM's sleep API and readiness to one engine (real vLLM or `snooze sim`).
 * Readiness after a wake is judged by `/is_sleeping`, never `/health`, which
 * answers 200 while the engine sleeps.
 */
export type SleepMode = "wait" | "abort" | "keep";

export class EngineError extends Error {
  readonly status?: number;
  /** The engine took the call and did not answer within its time: it is stuck, not just refusing. */
  readonly timedOut: boolean;
  /**
   * The call never reached the engine: this process is out of file descriptors, ports or memory
   * (EMFILE ...). It says nothing of the engine.
   */
  readonly local: boolean;
  /**
   * Nothing listened at the engine's address (ECONNREFUSED): the call reached no engine. One that
   * should be serving there has gone (its exit may not have been seen yet).
   */
  readonly refused: boolean;
  /**
   * The connection was reset before an answer (ECONNRESET): an engine that died with the call
   * unread, or a port closed while the call waited on it to be accepted. An engine that took the
   * call and then closed its connection is no reset ("other side closed").
   */
  readonly reset: boolean;
  constructor(
    message: string,
    status?: number,
    timedOut = false,
    local = false,
    refused = false,
    reset = false,
  ) {
    super(message);
    this.name = "EngineError";
    this.status = status;
    this.timedOut = timedOut;
    this.local = local;
    this.refused = refused;
    this.reset = reset;
  }
}

/**
 * The largest engine answer read: vLLM's /metrics, the largest, is some hundreds of KiB; the others
 * (is_sleeping, a 1-token warm-up) are small.
 */
const maxAnswerBytes = 16 * 1024 * 1024;

/** A call that failed in its connection (refused, cut), not with an answer or a timeout. */
export const isTransportError = (error: unknown): boolean =>
  error instanceof EngineError && error.status === undefined && !error.timedOut && !error.local;

/** A call this process could not make (out of file descriptors, ports ...): nothing of the engine. */
export const isLocalFailure = (error: unknown): boolean => error instanceof EngineError && error.local;

/** A call nothing listened for at the engine's address (EngineError.refused). */
export const isRefused = (error: unknown): boolean => error instanceof EngineError && error.refused;

/** A call whose connection was reset before an answer (EngineError.reset). */
export const isReset = (error: unknown): boolean => error instanceof EngineError && error.reset;

/**
 * A call the engine answered 401: it guards its `/v1` routes with an API key (vLLM's `--api-key` or
 * `VLLM_API_KEY`) that Snooze does not send. Only the warm-up goes there; the sleep API, `/health`
 * and `/metrics` are not guarded, and clients send their own key with their requests.
 */
export const isUnauthorized = (error: unknown): boolean =>
  error instanceof EngineError && error.status === 401;

export interface EngineLoad {
  running: number;
  waiting: number;
}

/**
 * Every engine call of this process goes through one undici Agent, the same HTTP client the
 * activator forwards with (lib/undici.ts), not the global `fetch`: fetch is Node's own copy of
 * undici, loaded on its first call (about 75 ms, on the first cold start's path) and resident after,
 * costs two to three times the CPU per call (on every wake: the wake call, /is_sleeping, the
 * warm-up), and reports a refused connection as "fetch failed" rather than what failed.
 */
let agent: Agent | undefined;
// With the activator's connector: an engine's unasked `100 Continue` before its answer (undici takes
// it for a broken server) is dropped, so a health check or a wake is not failed for it.
const engines = () => (agent ??= new (undici().Agent)({ connect: engineConnector() }));

const isOk = (status: number) => status >= 200 && status < 300;

/**
 * The time a call has: its own, or a share of one budget that several calls spend (a wake's), where
 * a timeout names the budget the person set, not the milliseconds that happened to be left.
 */
interface Deadline {
  signal: AbortSignal;
  ms: number;
  /** The calls are over: the timer goes now. */
  end(): void;
}
type Within = number | Deadline;
/**
 * `ms` from now, or sooner when `abandon` (the caller's own signal) aborts; `end` it once the calls
 * are over. Not `AbortSignal.timeout`, which cannot be cancelled: its timer, the signal and what
 * listened to it stayed until the time was up, though the call had ended (found by a probe: after
 * 20 rounds of starts, wakes, sleeps and swaps, about ten per round were still there, the warm-ups'
 * for their whole `startTimeout`, 10 minutes).
 */
const deadline = (ms: number, abandon?: AbortSignal): Deadline => {
  const timeout = new AbortController();
  const timer = setTimeout(
    () => timeout.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    ms,
  );
  timer.unref();
  return {
    signal: abandon ? AbortSignal.any([timeout.signal, abandon]) : timeout.signal,
    ms,
    end: () => clearTimeout(timer),
  };
};

/** An answer's status and body text. */
interface Answer {
  status: number;
  text: string;
}

/**
 * The API key a `vllm serve` command runs with, as vLLM takes it: its `--api-key` in any spelling
 * vLLM reads (`--api_key k`, `--api-k=k`: lib/vllm-flag.ts), else `VLLM_API_KEY` from its
 * environment. vLLM then wants `Authorization: Bearer <key>` on every path under `/v1`, the
 * warm-up's included.
 */
export function vllmApiKey(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  return vllmFlagValue(args, apiKeyFlag) || env.VLLM_API_KEY || undefined;
}

export class EngineClient {
  readonly baseUrl: string;
  /** The engine's API key (`vllmApiKey`), sent on the calls under `/v1` (the warm-up), where vLLM checks it. */
  private readonly apiKey?: string;

  constructor(address: string, apiKey?: string) {
    this.baseUrl = `http://${address}`;
    this.apiKey = apiKey;
  }

  /**
   * True when the HTTP server answers `/health` with 200 (the engine finished loading). Rejects
   * (`isLocalFailure`) when this process could not ask: out of file descriptors, the check would
   * say "unhealthy" of every engine, and the self-heal replaced healthy engines for Snooze's own
   * shortage (found by an outside tester: 300 idle client connections stopped two ready models).
   */
  async healthy(timeoutMs = 2_000): Promise<boolean> {
    try {
      return isOk((await this.send("GET", "/health", timeoutMs)).status);
    } catch (error) {
      if (isLocalFailure(error)) throw error;
      return false;
    }
  }

  async isSleeping(timeoutMs = 5_000): Promise<boolean> {
    return this.sleeping(timeoutMs);
  }

  private async sleeping(within: Within): Promise<boolean> {
    const body = (await this.call("GET", "/is_sleeping", within)) as { is_sleeping?: unknown };
    if (typeof body?.is_sleeping !== "boolean")
      throw new EngineError("/is_sleeping answered without is_sleeping");
    return body.is_sleeping;
  }

  /**
   * `mode=wait` lets in-flight requests finish first; sleeping while decoding has crashed engines.
   * `abandon` gives the call up early (its engine stopped answering its health check meanwhile).
   * The 200 is checked against `/is_sleeping`, as a wake's is: an engine that says it slept and is
   * still awake holds its GPU memory, and taken for asleep it would have a slot's next member
   * started or woken beside it (found by an outside tester). A check this process could not make
   * (out of file descriptors) takes the engine at its word: failing the sleep for it would have
   * the caller take a sleeping engine for awake, and a request sent to it hangs.
   */
  async sleep(level: 1 | 2, mode: SleepMode, timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    const within = deadline(timeoutMs, abandon);
    try {
      await this.call("POST", `/sleep?level=${level}&mode=${mode}`, within);
      const asleep = await this.sleeping(within).catch((error: unknown) => {
        if (isLocalFailure(error)) return true;
        throw error;
      });
      if (!asleep) throw new EngineError("the engine still reports is_sleeping=false after sleep");
    } finally {
      within.end();
    }
  }

  /**
   * Wakes the engine. After level 2 the weights were discarded: wake the weights,
   * reload them from disk, then wake the KV cache. `abandon` gives the call up early.
   */
  async wake(fromLevel: 1 | 2, timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    const within = deadline(timeoutMs, abandon);
    try {
      if (fromLevel === 2) {
        await this.call("POST", "/wake_up?tags=weights", within);
        await this.call("POST", "/collective_rpc", within, { method: "reload_weights" });
        await this.call("POST", "/wake_up?tags=kv_cache", within);
      } else {
        await this.call("POST", "/wake_up", within);
      }
      if (await this.sleeping(within))
        throw new EngineError("the engine still reports is_sleeping=true after wake_up");
    } finally {
      within.end();
    }
  }

  /**
   * A 1-token request: the first inference after a wake is several times slower without it. It must
   * come back as a well-formed completion: vLLM has shipped sleep-mode bugs that left a woken engine
   * answering garbage, and such an engine must not get the held requests. `abandon` gives it up early.
   */
  async warmup(model: string, timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    const within = deadline(timeoutMs, abandon);
    const ask = () =>
      this.call("POST", "/v1/completions", within, { model, prompt: "warm-up", max_tokens: 1 });
    // A connection dropped before any answer (the engine closed a kept-alive one, a reset) is sent
    // once more, as the activator does for a request: it says nothing about the engine's health.
    // One given up on purpose is not.
    const body = (await ask()
      .catch((error: unknown) => {
        if (isTransportError(error) && !within.signal.aborted) return ask();
        throw error;
      })
      .finally(within.end)) as { choices?: { text?: unknown }[] } | undefined;
    const choice = Array.isArray(body?.choices) ? body.choices[0] : undefined;
    if (typeof choice?.text !== "string")
      throw new EngineError(
        `the warm-up did not return a completion: ${engineWords(clip(JSON.stringify(body) ?? "empty body", 200))}`,
      );
  }

  /**
   * The sleep level the engine reports in `vllm:engine_sleep_state` (0 awake, 1 weights offloaded,
   * 2 weights discarded); undefined when its metrics do not say.
   */
  async sleepLevel(timeoutMs = 2_000): Promise<0 | 1 | 2 | undefined> {
    const { text } = await this.send("GET", "/metrics", timeoutMs);
    const state = (name: string) => sumMetric(text, "vllm:engine_sleep_state", { sleep_state: name });
    if (state("discard_all") > 0) return 2;
    if (state("weights_offloaded") > 0) return 1;
    if (state("awake") > 0) return 0;
    return undefined;
  }

  /** Requests the engine itself is running and queueing, from its Prometheus metrics. */
  async load(timeoutMs = 2_000): Promise<EngineLoad> {
    const { text } = await this.send("GET", "/metrics", timeoutMs);
    return {
      running: sumMetric(text, "vllm:num_requests_running"),
      waiting: sumMetric(text, "vllm:num_requests_waiting"),
    };
  }

  /** A call whose answer must be 2xx; its JSON body (or text, when it is not JSON). */
  private async call(method: string, path: string, within: Within, json?: unknown): Promise<unknown> {
    const { status, text } = await this.send(method, path, within, json);
    if (!isOk(status))
      throw new EngineError(`${method} ${path} answered ${status}: ${engineWords(clip(text, 300))}`, status);
    try {
      return text ? JSON.parse(text) : undefined;
    } catch {
      return text;
    }
  }

  /** One request within its time, answer read whole; a call that gets no answer is an EngineError. */
  private async send(method: string, path: string, within: Within, json?: unknown): Promise<Answer> {
    const own = typeof within === "number" ? deadline(within) : undefined;
    const { signal, ms } = own ?? (within as Deadline);
    // Sleep, wake and warm-up run inside their snooze.* spans: the engine sees that trace context.
    // Not the baggage of the caller whose request began the activation: it is that caller's
    // application data, and these calls are Snooze's own, made for every request held.
    const headers: Record<string, string> = json === undefined ? {} : { "content-type": "application/json" };
    if (this.apiKey && path.startsWith("/v1")) headers.authorization = `Bearer ${this.apiKey}`;
    propagation.inject(propagation.deleteBaggage(context.active()), headers);
    try {
      const { statusCode, body } = await engines().request({
        origin: this.baseUrl,
        path,
        method: method as "GET",
        headers,
        body: json === undefined ? undefined : JSON.stringify(json),
        // The deadline is the signal's: a level-2 wake may take longer than undici's own 300 s.
        signal,
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      // Bounded (found by an outside tester reading this): read whole, an engine's endless answer (a
      // /metrics that never ends) would be kept in memory for as long as the call's deadline lets it.
      return { status: statusCode, text: await boundedText(body, maxAnswerBytes) };
    } catch (error) {
      const timedOut = (error as Error).name === "TimeoutError";
      const cause = timedOut ? `no answer within ${ms}ms` : (error as Error).message;
      const code = (error as { code?: string }).code ?? "";
      const local = localResourceCodes.has(code);
      throw new EngineError(
        `${method} ${path}: ${cause}`,
        undefined,
        timedOut,
        local,
        code === "ECONNREFUSED",
        code === "ECONNRESET",
      );
    } finally {
      own?.end();
    }
  }
}
