import type { IncomingMessage, ServerResponse } from "node:http";
import { callerHeaders, forwardedHeader, type TokenSource } from "../../lib/control-protocol.ts";
import { sendJson } from "../../lib/http/json.ts";
import { latestStateWriter } from "../../lib/http/latest-state-writer.ts";
import { decodeSegment, malformedSegment } from "../../lib/http/path-segment.ts";
import type { Logger } from "../../lib/log.ts";
import { demandOf, type FlowReport } from "../demand-metric.ts";
import { RepeatGate } from "./repeat-gate.ts";
import { nextWatchRetryMs } from "./watch-retry.ts";

/**
 * A Model's demand as external scalers (KEDA) read it: the requests at once its arrivals need
 * (arrival rate × service time, demand-metric.ts), made by the replica that holds the Model's
 * Lease from its activators' reports. Any replica can be asked: one that does not lead the Model
 * asks the one that does, over its control server (`GET /snooze/v1/demand/<namespace>/<name>`,
 * `?watch=1` for a stream of changes).
 */
export interface DemandSample {
  /** The Model, `namespace/name`. */
  model: string;
  inFlight: number;
  held: number;
  /** Requests at once the arrivals need (demandOf): what the HPA divides by its target. */
  demand: number;
  /** "rate" (arrival rate × service time) or "held" (in-flight + held: no service time known yet). */
  basis: "rate" | "held";
  /** Requests per second arriving, and the mean service time (ms), when known. */
  arrivalRate?: number;
  serviceMs?: number;
  /** Held requests the warming replicas will not take when they are up. */
  backlog: number;
  /** Something wants the Model: a request in flight or held now, or demand (arrivals within the rate window). */
  active: boolean;
  /** The Model's spec.replicas is 0 (KEDA's zero): an external scaler has yet to scale it up. */
  atZero: boolean;
  /**
   * The leader took the lead a moment ago and has no full report from the activators yet: the
   * counts may be short (a held request it was told of is certain, the rest is not known).
   */
  settling: boolean;
}

/** One step of a watch: the sample, and whether a request was just held (an activator's demand). */
export interface DemandUpdate {
  sample: DemandSample;
  poke: boolean;
}

/**
 * Two steps of a watch as one, for a watcher that has not taken the first yet: the newer sample
 * (only the latest load matters), and a poke if either was one (a request held in between must
 * still make the scaler push "active" again).
 */
export const mergeUpdates = (waiting: DemandUpdate, newer: DemandUpdate): DemandUpdate => ({
  sample: newer.sample,
  poke: waiting.poke || newer.poke,
});

/** What the leader of a Model knows that its demand is made from (demandOf's inputs but `now`). */
export interface LeaderView {
  load: { inFlight: number; held: number };
  reports?: FlowReport[][];
  ready?: number;
  warming?: number;
  concurrency?: number;
  startMs?: number;
}

/** What the autoscaler tells about a Model (KubeAutoscaler implements it). */
export type ModelLookup =
  /** `settling`: it just took the lead and has not heard from the activators yet (its load would read 0). */
  | ({ leading: true; desired?: number; settling?: boolean } & LeaderView)
  | { leading: false; leader?: string };

export interface DemandSource {
  /** The Model `namespace/name` as this replica sees it; undefined when it knows no such Model. */
  lookup(key: string): ModelLookup | undefined;
  /** The load of a Model this replica leads changed; `poke`: an activator just held a request. */
  onLoad(listener: (key: string, poke: boolean) => void): () => void;
  identity: string;
}

export class DemandError extends Error {
  readonly code: "not-found" | "unavailable";
  constructor(code: "not-found" | "unavailable", message: string) {
    super(message);
    this.code = code;
  }
}

export const demandPathPrefix = "/snooze/v1/demand/";
export const demandPathOf = (key: string) =>
  `${demandPathPrefix}${key.split("/").map(encodeURIComponent).join("/")}`;
const demandRoute = /^\/snooze\/v1\/demand\/([^/]+)\/([^/]+)$/;
/** `GET /snooze/v1/demand/<namespace>/<name>`: the control server lets only Snooze's callers read it. */
export const isDemandRoute = (path: string) => demandRoute.test(path);

export interface ModelDemandOptions {
  source: DemandSource;
  log: Logger;
  /** This replica's own credentials, shown to the leader it asks (which checks every caller). */
  tokens?: TokenSource;
  /** How often a watch re-reads the load without an event (activators' reports expire) and sends a keep-alive. */
  tickMs?: number;
  /** A watch of another replica that sends nothing for this long is dropped and opened again. */
  staleMs?: number;
  /** Pause before a broken watch of another replica is opened again (nextWatchRetryMs: doubled while refused). */
  retryMs?: number;
  /** The longest pause between watches of another replica that keeps refusing (default 5 s). */
  retryMaxMs?: number;
}

export const sampleOf = (
  key: string,
  found: LeaderView & { desired?: number; settling?: boolean },
  now: number,
): DemandSample => {
  const { inFlight, held } = found.load;
  const estimate = demandOf({
    inFlight,
    held,
    reports: found.reports ?? [],
    ready: found.ready ?? 0,
    warming: found.warming ?? 0,
    concurrency: found.concurrency,
    startMs: found.startMs,
    now,
  });
  return {
    model: key,
    inFlight,
    held,
    ...estimate,
    // Something is there to serve (KEDA's 0 → 1 goes on the first held request, whatever the rate),
    // or arrived within the rate window: a Model whose requests are answered between two of KEDA's
    // polls is still in use, and a scale KEDA lost to a conflict is pushed again meanwhile.
    active: inFlight + held > 0 || estimate.demand > 0,
    atZero: found.desired === 0,
    settling: found.settling === true,
  };
};

const sameSample = (a: DemandSample, b: DemandSample) =>
  a.inFlight === b.inFlight &&
  a.held === b.held &&
  a.demand === b.demand &&
  a.model === b.model &&
  a.atZero === b.atZero &&
  a.settling === b.settling;

function isSample(value: unknown): value is DemandSample {
  const v = value as DemandSample;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.model === "string" &&
    Number.isInteger(v.inFlight) &&
    Number.isInteger(v.held) &&
    typeof v.demand === "number" &&
    Number.isFinite(v.demand) &&
    typeof v.active === "boolean" &&
    typeof v.atZero === "boolean" &&
    typeof v.settling === "boolean"
  );
}

/** Resolves after `ms`, or at once when `signal` aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** Reads and watches Models' demand, here when this replica leads the Model, else at its leader. */
export class ModelDemand {
  private readonly source: DemandSource;
  private readonly log: Logger;
  private readonly tickMs: number;
  private readonly staleMs: number;
  private readonly retryMs: number;
  private readonly retryMaxMs: number;
  /** A leader refusing the watches: said once a minute per leader and status. */
  private readonly refusals = new RepeatGate({ everyMs: 60_000, maxKeys: 64 });
  private readonly tokens?: TokenSource;
  readonly counts = { proxied: 0, watchesOpened: 0 };

  constructor(options: ModelDemandOptions) {
    this.source = options.source;
    this.log = options.log;
    this.tickMs = options.tickMs ?? 1_000;
    this.staleMs = options.staleMs ?? 3_000;
    this.retryMs = options.retryMs ?? 200;
    this.retryMaxMs = options.retryMaxMs ?? 5_000;
    this.tokens = options.tokens;
  }

  /** The Model's demand now. `localOnly`: answer only if this replica leads it (a forwarded ask). */
  async sample(
    key: string,
    options: { localOnly?: boolean; signal?: AbortSignal } = {},
  ): Promise<DemandSample> {
    const found = this.source.lookup(key);
    if (!found) throw new DemandError("not-found", `no Model ${key} is known to the autoscaler`);
    if (found.leading) return sampleOf(key, found, Date.now());
    if (options.localOnly || !found.leader)
      throw new DemandError("unavailable", `no autoscaler leads Model ${key} right now; retry`);
    this.counts.proxied++;
    const response = await fetch(`${found.leader}${demandPathOf(key)}`, {
      headers: await this.headers(),
      signal: options.signal ?? AbortSignal.timeout(2_000),
    }).catch((error: unknown) => {
      throw new DemandError("unavailable", `the leader of Model ${key} did not answer: ${String(error)}`);
    });
    const body = (await response.json().catch(() => undefined)) as unknown;
    if (response.status === 404) throw new DemandError("not-found", `no Model ${key} is known to its leader`);
    if (!response.ok || !isSample(body))
      throw new DemandError("unavailable", `the leader of Model ${key} answered ${response.status}`);
    return body;
  }

  /**
   * The Model's demand as it changes: the current sample first, then one whenever the load changes
   * or an activator holds a new request (`poke`), and a repeat every tick. Follows the Lease: read
   * here while this replica leads the Model, streamed from the leader otherwise. Ends when `signal`
   * aborts; throws DemandError("not-found") when no such Model is known (at the start or later).
   */
  async *watch(
    key: string,
    signal: AbortSignal,
    options: { localOnly?: boolean } = {},
  ): AsyncGenerator<DemandUpdate> {
    this.counts.watchesOpened++;
    let retry: number | undefined;
    while (!signal.aborted) {
      const found = this.source.lookup(key);
      if (!found) throw new DemandError("not-found", `no Model ${key} is known to the autoscaler`);
      if (found.leading) yield* this.watchHere(key, signal);
      else if (options.localOnly)
        throw new DemandError("unavailable", `this autoscaler does not lead Model ${key}`);
      else if (found.leader) {
        const delivered = yield* this.watchLeader(key, found.leader, signal);
        retry = nextWatchRetryMs(retry, delivered, { firstMs: this.retryMs, maxMs: this.retryMaxMs });
        await pause(retry, signal);
      } else await pause(this.retryMs, signal);
    }
  }

  /** While this replica leads the Model. */
  private async *watchHere(key: string, signal: AbortSignal): AsyncGenerator<DemandUpdate> {
    let wake: (() => void) | undefined;
    let poked = false;
    // Set by an event that came while no one waited: the next wait returns at once.
    let dirty = false;
    const unsubscribe = this.source.onLoad((changed, poke) => {
      if (changed !== key) return;
      if (poke) poked = true;
      dirty = true;
      wake?.();
    });
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort);
    try {
      let last: DemandSample | undefined;
      let lastAt = 0;
      while (!signal.aborted) {
        dirty = false;
        const found = this.source.lookup(key);
        if (!found?.leading) return; // led elsewhere now (or gone): the caller looks again
        const sample = sampleOf(key, found, Date.now());
        const poke = poked;
        poked = false;
        // The repush period, on the monotonic clock: measured within this process.
        const now = performance.now();
        if (!last || poke || !sameSample(last, sample) || now - lastAt >= this.tickMs) {
          last = sample;
          lastAt = now;
          yield { sample, poke };
        }
        if (!dirty)
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, this.tickMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        wake = undefined;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      unsubscribe();
    }
  }

  /**
   * From the leader's control server, until it ends, goes quiet, or someone else leads. Returns
   * whether it delivered anything (a refused or failed watch did not: the next waits longer).
   */
  private async *watchLeader(
    key: string,
    leader: string,
    signal: AbortSignal,
  ): AsyncGenerator<DemandUpdate, boolean> {
    let delivered = false;
    const abort = new AbortController();
    const stop = () => abort.abort();
    signal.addEventListener("abort", stop);
    let heard = performance.now();
    // Leadership may move while the stream is open (a frozen leader's stream just stops): look often.
    const watchdog = setInterval(
      () => {
        const found = this.source.lookup(key);
        const moved = !found || found.leading || found.leader !== leader;
        if (moved || performance.now() - heard > this.staleMs) abort.abort();
      },
      Math.min(this.tickMs, 500),
    );
    try {
      this.counts.proxied++;
      const response = await fetch(`${leader}${demandPathOf(key)}?watch=1`, {
        headers: await this.headers(),
        signal: abort.signal,
      });
      if (response.status === 404) {
        await response.body?.cancel();
        // The leader does not know it (yet, or any more): only our own view decides it is gone.
        return false;
      }
      if (!response.ok || !response.body) {
        await response.body?.cancel();
        this.refused(key, leader, response.status);
        return false;
      }
      const decoder = new TextDecoder();
      let buffered = "";
      for await (const chunk of response.body) {
        heard = performance.now();
        buffered += decoder.decode(chunk as Uint8Array, { stream: true });
        let newline = buffered.indexOf("\n");
        while (newline >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          newline = buffered.indexOf("\n");
          if (!line) continue;
          const update = JSON.parse(line) as { sample?: unknown; poke?: unknown };
          if (isSample(update.sample)) {
            delivered = true;
            yield { sample: update.sample, poke: update.poke === true };
          }
        }
      }
    } catch (error) {
      if (!abort.signal.aborted)
        this.log.debug("watching demand at the leader failed", { model: key, leader, error });
    } finally {
      clearInterval(watchdog);
      signal.removeEventListener("abort", stop);
      abort.abort();
    }
    return delivered;
  }

  /**
   * The leader refused a watch: its credentials check (401, 403) is a setup to fix, said as a
   * warning; anything else (503 while the Lease moves) passes. Once a minute per leader and status.
   */
  private refused(key: string, leader: string, status: number): void {
    const said = this.refusals.pass(`${leader} ${status}`, performance.now());
    if (!said) return;
    const fields = { model: key, leader, status, ...(said.repeated > 0 ? { repeated: said.repeated } : {}) };
    if (status === 401 || status === 403)
      this.log.warn("the Model's leader refused this autoscaler's watch of its demand", fields);
    else this.log.debug("the Model's leader did not take a watch of its demand", fields);
  }

  /**
   * `GET /snooze/v1/demand/<namespace>/<name>[?watch=1]` on the control server: the sample as JSON,
   * or a stream of `{sample, poke}` lines (NDJSON). A forwarded ask is answered only by the leader.
   * Returns false when the path is not this route.
   */
  /** Headers of an ask to the leader: forwarded, with this replica's bearer token. */
  private headers(): Promise<Record<string, string>> {
    const extra = { [forwardedHeader]: this.source.identity };
    return this.tokens ? callerHeaders(this.tokens, extra) : Promise.resolve(extra);
  }

  handle(req: IncomingMessage, res: ServerResponse, path: string, forwarded: boolean): boolean {
    const match = req.method === "GET" ? demandRoute.exec(path) : null;
    if (!match) return false;
    const namespace = decodeSegment(match[1]!);
    const name = decodeSegment(match[2]!);
    if (namespace === undefined || name === undefined) {
      const segment = namespace === undefined ? match[1]! : match[2]!;
      sendJson(res, 400, { error: malformedSegment(segment).error.message });
      return true;
    }
    const key = `${namespace}/${name}`;
    const watching = new URL(req.url ?? "/", "http://x").searchParams.get("watch") === "1";
    const fail = (error: unknown) => {
      const status = error instanceof DemandError ? (error.code === "not-found" ? 404 : 503) : 500;
      if (res.headersSent) return res.destroy();
      const text = JSON.stringify({ error: (error as Error).message });
      res.writeHead(status, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
    };
    if (!watching) {
      this.sample(key, { localOnly: forwarded }).then((sample) => {
        const text = JSON.stringify(sample);
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
        res.end(text);
      }, fail);
      return true;
    }
    const abort = new AbortController();
    res.on("close", () => abort.abort());
    // At the watcher's pace: one that stops reading gets the latest step when it reads again,
    // instead of this replica buffering every step meanwhile.
    const writer = latestStateWriter(
      res,
      (update: DemandUpdate) => `${JSON.stringify(update)}\n`,
      mergeUpdates,
    );
    void (async () => {
      try {
        for await (const update of this.watch(key, abort.signal, { localOnly: forwarded })) {
          if (!res.headersSent)
            res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
          writer.send(update);
        }
        if (!res.headersSent)
          throw new DemandError("unavailable", `this autoscaler does not lead Model ${key}`);
        writer.end();
      } catch (error) {
        fail(error);
      }
    })();
    return true;
  }
}
