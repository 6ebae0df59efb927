/**
 * One simulated vLLM engine: loading, a scheduler with `--max-num-seqs` slots,
 * token-by-token decoding, and vLLM's sleep state machine.
 *
 * The state follows vLLM's EngineCore:
 * - a scheduler pause (`new`: nothing new is scheduled, running requests go on;
 *   `all`: running requests freeze too), set by every sleep, cleared by every wake;
 * - the executor's sleeping memory tags (`weights`, `kv_cache`), set by a sleep of
 *   level >= 1 and cleared tag by tag by `wake_up`;
 * - `is_sleeping` = scheduler paused or any tag asleep.
 * Sleep, wake, reload and cache resets are executed one at a time in arrival
 * order, as vLLM's engine core executes its utility calls; `is_sleeping` waits
 * while the executor is busy sleeping, waking or reloading, as in vLLM.
 */
import type { Logger } from "../../lib/log.ts";
import { AbortedError, delay, delayUntil, forever } from "./delay.ts";
import type { Faults } from "./faults.ts";
import { GpuClaim } from "./gpu-ledger.ts";
import { EngineMetrics, type FinishReason } from "./metrics.ts";
import type { SimOptions } from "./options.ts";
import { createRandom, jittered } from "./random.ts";
import { formatGiB } from "./size.ts";
import type { PlannedOutput } from "./text.ts";
import { internalError } from "./vllm-error.ts";

export type PauseMode = "abort" | "wait" | "keep";
export type SleepTag = "weights" | "kv_cache";
export type EnginePhase = "loading" | "ready" | "dead";

/** One token (or the end) of one choice, in one engine step. */
export interface StepDelta {
  choice: number;
  text: string;
  /** Set on the choice's last delta: the token that ended it, or an empty abort. */
  finishReason: FinishReason | null;
}

export interface GenerationRequest {
  promptTokens: number;
  /** The answer of each choice, planned when decoding starts (the weights may be garbage then). */
  plan(garbage: boolean): PlannedOutput[];
  /** Called once per engine step with that step's deltas. */
  onStep(deltas: StepDelta[]): void;
}

export interface GenerationResult {
  finishReasons: FinishReason[];
  completionTokens: number[];
}

export interface Generation {
  done: Promise<GenerationResult>;
  /** The client went away: vLLM aborts the request. */
  cancel(): void;
}

/** Start-up failed the way vLLM's does (not enough GPU memory): the process must exit non-zero. */
export class SimStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SimStartError";
  }
}

/** Wake time split when tags are woken one at a time: mapping the weights is most of it. */
const wakeShare: Record<SleepTag, number> = { weights: 0.9, kv_cache: 0.1 };

class Sequence {
  readonly request: GenerationRequest;
  readonly arrival = performance.now();
  readonly abort = new AbortController();
  plans: PlannedOutput[] = [];
  emitted: number[] = [];
  finished: (FinishReason | null)[] = [];
  resolve!: (result: GenerationResult) => void;
  readonly done: Promise<GenerationResult>;
  settled = false;

  constructor(request: GenerationRequest) {
    this.request = request;
    this.done = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }
}

interface Waiter {
  ready: () => boolean;
  resolve: () => void;
}

/** Distinct request lines `/sim/state` keeps counts of; later ones count as `(other)`. */
const maxSeenKeys = 256;

export class SimEngine {
  readonly options: SimOptions;
  readonly faults: Faults;
  readonly metrics = new EngineMetrics();
  readonly log: Logger;
  readonly gpu: GpuClaim | undefined;
  /** The name responses and metrics carry: vLLM's first served model name. */
  readonly modelName: string;
  phase: EnginePhase = "loading";
  deathReason: string | undefined;

  private readonly random: () => number;
  private readonly lifetime = new AbortController();
  private readonly waiting: Sequence[] = [];
  private readonly running = new Set<Sequence>();
  private readonly waiters = new Set<Waiter>();
  private readonly deathListeners = new Set<(reason: string) => void>();
  private schedulerPause: "none" | "new" | "all" = "none";
  private readonly sleepingTags = new Set<SleepTag>();
  private sleepLevel = 0;
  private weightsValid = true;
  private coldAfterWake = false;
  /** Inference requests that arrived while the engine slept or paused: a router that gates traffic sends none. */
  private arrivedWhileAsleep = 0;
  /** Requests by method and path exactly as they arrived (before any URL parsing), for `/sim/state`. */
  private readonly seen = new Map<string, number>();
  private controlTail: Promise<unknown> = Promise.resolve();
  /** Utility calls in progress that keep vLLM's engine core from answering `is_sleeping`. */
  private blocking = 0;
  private finishedRequests = 0;

  constructor(options: SimOptions, log: Logger) {
    this.options = options;
    this.faults = { ...options.faults };
    this.modelName = options.servedModelNames[0] ?? options.model;
    this.log = log;
    this.random = createRandom(options.seed);
    if (options.gpu) {
      this.gpu = new GpuClaim({
        dir: options.gpu.dir,
        gpuId: options.gpu.id,
        totalBytes: options.gpu.memoryBytes,
        holder: `${this.modelName} (pid ${process.pid}, port ${options.port})`,
      });
    }
  }

  /** Bytes the engine holds on its GPU when fully awake: vLLM takes its whole utilization share. */
  get footprintBytes(): number {
    const gpu = this.options.gpu;
    return gpu ? Math.floor(gpu.memoryBytes * this.options.gpuMemoryUtilization) : 0;
  }

  private tagBytes(tag: SleepTag): number {
    const gpu = this.options.gpu;
    if (!gpu) return 0;
    return tag === "weights" ? gpu.modelBytes : this.footprintBytes - gpu.modelBytes;
  }

  /**
   * Takes the GPU memory at start, as vLLM checks free memory before loading:
   * throws SimStartError with vLLM's message when the device is too full.
   */
  claimGpu(): void {
    if (!this.gpu || !this.options.gpu) return;
    const result = this.gpu.set(this.footprintBytes);
    if (result.ok) return;
    const total = this.options.gpu.memoryBytes;
    const free = total - result.usedByOthers;
    const holders = result.others.map((claim) => `${claim.holder}: ${formatGiB(claim.bytes)}`).join(", ");
    throw new SimStartError(
      `ValueError: Free memory on device cuda:${this.options.gpu.id} (${formatGiB(free)}/${formatGiB(total)}) on ` +
        `startup is less than desired GPU memory utilization (${this.options.gpuMemoryUtilization}, ` +
        `${formatGiB(this.footprintBytes)}). Decrease GPU memory utilization or reduce GPU memory used by other ` +
        `processes. [snooze sim: simulated GPU ${this.options.gpu.id} is held by ${holders}]`,
    );
  }

  /** Loading the weights: resolves when the port may open; never with the never-ready fault. */
  async load(): Promise<void> {
    if (this.faults.neverReady) {
      this.log.warn("fault: loading never finishes");
      await forever(this.lifetime.signal);
    }
    await delay(this.scaled(this.options.loadTimeMs), this.lifetime.signal);
    if (this.phase === "loading") this.phase = "ready";
  }

  /** vLLM's `is_sleeping`, answered once no sleep, wake or reload is executing. */
  async isSleepingWhenIdle(): Promise<boolean> {
    await this.waitUntil(() => this.blocking === 0, this.lifetime.signal);
    return this.isSleeping;
  }

  get isSleeping(): boolean {
    return this.schedulerPause !== "none" || this.sleepingTags.size > 0;
  }

  /** A snapshot for `/sim/state` and tests. */
  state() {
    return {
      phase: this.phase,
      isSleeping: this.isSleeping,
      schedulerPaused: this.schedulerPause,
      sleepingTags: [...this.sleepingTags],
      sleepLevel: this.sleepLevel,
      weightsValid: this.weightsValid,
      coldAfterWake: this.coldAfterWake,
      arrivedWhileAsleep: this.arrivedWhileAsleep,
      requests: Object.fromEntries(this.seen),
      running: this.running.size,
      waiting: this.waiting.length,
      busy: this.blocking > 0,
      gpu: this.options.gpu
        ? { id: this.options.gpu.id, claimedBytes: this.gpu?.bytes ?? 0, footprintBytes: this.footprintBytes }
        : null,
      faults: { ...this.faults },
      deathReason: this.deathReason ?? null,
    };
  }

  /** Counts one request as it arrived: `POST /v1/../sleep` stays that, whatever it resolves to. */
  countRequest(method: string, target: string): void {
    const raw = `${method} ${target.split("?")[0]}`;
    const key = this.seen.has(raw) || this.seen.size < maxSeenKeys ? raw : "(other)";
    this.seen.set(key, (this.seen.get(key) ?? 0) + 1);
  }

  gauges() {
    // KV cache usage: tokens held by running requests over a capacity of max-model-len per slot.
    let tokens = 0;
    for (const seq of this.running) {
      tokens += seq.request.promptTokens + seq.emitted.reduce((sum, n) => sum + n, 0);
    }
    const capacity = this.options.maxModelLen * this.options.maxNumSeqs;
    const kvCacheUsage = this.sleepingTags.has("kv_cache") ? 0 : Math.min(1, tokens / capacity);
    return { running: this.running.size, waiting: this.waiting.length, kvCacheUsage };
  }

  // ---- inference ----

  /** Queues a request; it decodes when a slot is free and the engine is awake (else it is parked). */
  submit(request: GenerationRequest): Generation {
    const seq = new Sequence(request);
    if (this.sleepingTags.size > 0 || this.schedulerPause !== "none") this.arrivedWhileAsleep += 1;
    this.waiting.push(seq);
    this.pump();
    return { done: seq.done, cancel: () => this.cancel(seq) };
  }

  /** The response of a finished request was fully written (counts for the die-after fault). */
  requestCompleted(): void {
    this.finishedRequests += 1;
    if (this.faults.dieAfter > 0 && this.finishedRequests >= this.faults.dieAfter) {
      this.die(`fault: died after ${this.finishedRequests} requests`);
    }
  }

  private get canSchedule(): boolean {
    // vLLM resumes its scheduler after any wake_up, even one that left the KV cache
    // asleep; decoding then would touch unmapped memory, so the simulator waits for
    // every tag to be awake.
    return this.phase === "ready" && this.schedulerPause === "none" && this.sleepingTags.size === 0;
  }

  /** Running requests may take their next step: not frozen by `mode=keep`, memory mapped. */
  private get canStep(): boolean {
    return this.phase === "ready" && this.schedulerPause !== "all" && this.sleepingTags.size === 0;
  }

  private pump(): void {
    if (!this.canSchedule || this.waiting.length === 0) return;
    // The first step after a wake is slow; every request released into it shares that.
    const slowdown = this.coldAfterWake ? this.options.firstRequestSlowdown : 1;
    while (this.running.size < this.options.maxNumSeqs && this.waiting.length > 0) {
      const seq = this.waiting.shift()!;
      this.running.add(seq);
      this.coldAfterWake = false;
      void this.decode(seq, slowdown);
    }
  }

  private async decode(seq: Sequence, slowdown: number): Promise<void> {
    seq.plans = seq.request.plan(!this.weightsValid);
    seq.emitted = seq.plans.map(() => 0);
    seq.finished = seq.plans.map(() => null);
    this.metrics.promptTokens += seq.request.promptTokens;
    const signal = seq.abort.signal;
    const { ttftMs, ttftJitterMs, itlMs, itlJitterMs } = this.options;
    try {
      // Each token is due a TTFT or ITL after the one before; a freeze (mode=keep) shifts the schedule.
      let due = performance.now() + this.scaled(jittered(ttftMs, ttftJitterMs, this.random) * slowdown);
      await delayUntil(due, signal);
      due = await this.waitToStep(due, signal);
      this.step(seq);
      this.metrics.ttft.observe((performance.now() - seq.arrival) / 1000);
      let last = performance.now();
      while (seq.finished.some((reason) => reason === null)) {
        due += this.scaled(jittered(itlMs, itlJitterMs, this.random) * slowdown);
        await delayUntil(due, signal);
        due = await this.waitToStep(due, signal);
        this.step(seq);
        const now = performance.now();
        this.metrics.itl.observe((now - last) / 1000);
        last = now;
      }
    } catch (error) {
      if (!(error instanceof AbortedError)) throw error;
      this.finishAborted(seq);
    } finally {
      this.running.delete(seq);
      this.settle(seq);
      this.stateChanged();
    }
  }

  /** Waits while decoding is frozen; returns the schedule shifted by the time frozen. */
  private async waitToStep(due: number, signal: AbortSignal): Promise<number> {
    if (this.canStep) return due;
    const frozenAt = performance.now();
    await this.waitUntil(() => this.canStep, signal);
    return due + (performance.now() - frozenAt);
  }

  private step(seq: Sequence): void {
    const deltas: StepDelta[] = [];
    seq.plans.forEach((plan, choice) => {
      if (seq.finished[choice] !== null) return;
      const index = seq.emitted[choice]!;
      seq.emitted[choice] = index + 1;
      const finishReason = index + 1 >= plan.tokens.length ? plan.finishReason : null;
      seq.finished[choice] = finishReason;
      deltas.push({ choice, text: plan.tokens[index] ?? "", finishReason });
    });
    this.metrics.generationTokens += deltas.length;
    seq.request.onStep(deltas);
  }

  private finishAborted(seq: Sequence): void {
    if (seq.plans.length === 0) {
      // Aborted before decoding started: only the number of choices matters.
      seq.plans = seq.request.plan(false);
      seq.emitted = seq.plans.map(() => 0);
      seq.finished = seq.plans.map(() => null);
    }
    const deltas: StepDelta[] = [];
    seq.finished.forEach((reason, choice) => {
      if (reason !== null) return;
      seq.finished[choice] = "abort";
      deltas.push({ choice, text: "", finishReason: "abort" });
    });
    if (deltas.length > 0 && this.phase !== "dead") seq.request.onStep(deltas);
  }

  private settle(seq: Sequence): void {
    if (seq.settled) return;
    seq.settled = true;
    const finishReasons = seq.finished.map((reason) => reason ?? "abort");
    for (const reason of finishReasons) this.metrics.success[reason] += 1;
    this.metrics.e2e.observe((performance.now() - seq.arrival) / 1000);
    seq.resolve({ finishReasons, completionTokens: seq.emitted });
  }

  private cancel(seq: Sequence): void {
    if (seq.settled) return;
    const queued = this.waiting.indexOf(seq);
    if (queued >= 0) {
      this.waiting.splice(queued, 1);
      this.finishAborted(seq);
      this.settle(seq);
      this.stateChanged();
      return;
    }
    seq.abort.abort();
  }

  /** vLLM's `mode=abort`: every request, running or queued, finishes with `abort`. */
  private abortAll(): void {
    for (const seq of this.waiting.splice(0)) {
      this.finishAborted(seq);
      this.settle(seq);
    }
    for (const seq of this.running) seq.abort.abort();
  }

  // ---- sleep API ----

  /** `POST /sleep?level=&mode=`: resolves when vLLM would answer 200. */
  sleep(level: number, mode: PauseMode): Promise<void> {
    return this.control(async () => {
      if (mode === "abort" && this.faults.crashOnAbortSleep && this.running.size > 0) {
        this.die(`fault: crashed on sleep with mode=abort while ${this.running.size} requests were decoding`);
        await forever(this.lifetime.signal);
      }
      this.schedulerPause = mode === "keep" ? "all" : "new";
      if (mode === "abort") this.abortAll();
      this.stateChanged();
      if (mode === "wait") {
        // vLLM's engine core keeps answering (is_sleeping: true) while requests drain.
        this.setBlocking(-1);
        try {
          await this.waitUntil(() => this.running.size === 0, this.lifetime.signal);
        } finally {
          this.setBlocking(+1);
        }
      }
      if (level >= 1 && this.faults.sleepFail > 0) {
        this.faults.sleepFail -= 1;
        this.schedulerPause = "none";
        this.stateChanged();
        this.log.warn("fault: sleep fails");
        throw internalError("RuntimeError: CUDA error: out of memory [snooze sim: injected sleep failure]");
      }
      if (level >= 1) {
        if (this.sleepingTags.size > 0) {
          // vLLM's executor ignores a sleep while asleep: level 1 then 2 stays level 1.
          this.log.warn("executor is already sleeping", {
            askedLevel: level,
            sleepingLevel: this.sleepLevel,
          });
        } else {
          const sleepTime = level === 1 ? this.options.sleepTimeL1Ms : this.options.sleepTimeL2Ms;
          await delay(this.scaled(sleepTime), this.lifetime.signal);
          this.sleepingTags.add("weights");
          this.sleepingTags.add("kv_cache");
          this.sleepLevel = level === 1 ? 1 : 2;
          if (level !== 1) this.weightsValid = false;
          this.gpu?.set(0);
        }
      }
      this.metrics.recordSleepState(true, level);
      this.log.info("asleep", { sleepLevel: level, mode });
      this.stateChanged();
    });
  }

  /** `POST /wake_up[?tags=...]`: no tags wakes everything; `scheduling` only resumes the scheduler. */
  wake(tags: string[] | undefined): Promise<void> {
    return this.control(async () => {
      if (this.faults.wakeHang > 0) {
        this.faults.wakeHang -= 1;
        this.log.warn("fault: wake hangs");
        await forever(this.lifetime.signal);
      }
      const memoryTags = tags?.filter((tag) => tag !== "scheduling");
      if (memoryTags === undefined || memoryTags.length > 0) await this.wakeExecutor(memoryTags);
      this.schedulerPause = "none";
      this.metrics.recordSleepState(false, 0);
      this.log.info("woke", { tags: tags ?? "all", isSleeping: this.isSleeping });
      this.stateChanged();
    });
  }

  private async wakeExecutor(tags: string[] | undefined): Promise<void> {
    if (this.sleepingTags.size === 0) return; // vLLM: "Executor is not sleeping."
    const targets = [...this.sleepingTags].filter((tag) => tags === undefined || tags.includes(tag));
    if (this.faults.wakeFail > 0) {
      this.faults.wakeFail -= 1;
      this.log.warn("fault: wake fails");
      throw internalError(
        "RuntimeError: CUDA error: an illegal memory access was encountered [snooze sim: injected wake failure]",
      );
    }
    const needed = targets.reduce((sum, tag) => sum + this.tagBytes(tag), 0);
    if (this.gpu && this.options.gpu && needed > 0) {
      const result = this.gpu.set(this.gpu.bytes + needed);
      if (!result.ok) {
        const free = this.options.gpu.memoryBytes - result.usedByOthers - this.gpu.bytes;
        const holders = result.others.map((claim) => `${claim.holder}: ${formatGiB(claim.bytes)}`).join(", ");
        this.log.error("wake failed: out of GPU memory", { needed, free });
        throw internalError(
          `CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62 [snooze sim: waking ${targets.join(", ")} ` +
            `needs ${formatGiB(needed)} on GPU ${this.options.gpu.id}, ${formatGiB(free)} free; held by ${holders}]`,
        );
      }
    }
    const time = this.sleepLevel === 1 ? this.options.wakeTimeL1Ms : this.options.wakeTimeL2Ms;
    const share = tags === undefined ? 1 : targets.reduce((sum, tag) => sum + wakeShare[tag], 0);
    await delay(this.scaled(time * share), this.lifetime.signal);
    for (const tag of targets) this.sleepingTags.delete(tag);
    if (this.sleepingTags.size === 0) {
      this.sleepLevel = 0;
      this.coldAfterWake = true;
    }
  }

  /** `collective_rpc` `reload_weights`: after a level-2 sleep the weights must come back from disk. */
  reloadWeights(): Promise<void> {
    return this.control(async () => {
      if (this.sleepingTags.has("weights")) {
        throw internalError(
          "RuntimeError: CUDA error: an illegal memory access was encountered " +
            "[snooze sim: reload_weights while the weights are asleep; wake_up?tags=weights first]",
        );
      }
      await delay(this.scaled(this.options.reloadTimeMs), this.lifetime.signal);
      this.weightsValid = true;
      this.log.info("weights reloaded");
    });
  }

  /** `POST /reset_prefix_cache`: the simulator keeps no prefix cache; ordered like any utility call. */
  resetPrefixCache(): Promise<void> {
    return this.control(async () => {});
  }

  // ---- lifetime ----

  onDeath(listener: (reason: string) => void): void {
    this.deathListeners.add(listener);
  }

  /** A crash: everything stops at once, memory is released, listeners close the server. */
  die(reason: string): void {
    if (this.phase === "dead") return;
    this.phase = "dead";
    this.deathReason = reason;
    this.log.error("engine died", { reason });
    this.stopEverything();
    for (const listener of this.deathListeners) listener(reason);
  }

  /** A normal shutdown. */
  close(): void {
    if (this.phase === "dead") return;
    this.phase = "dead";
    this.deathReason = "closed";
    this.stopEverything();
  }

  private stopEverything(): void {
    this.lifetime.abort();
    for (const seq of this.waiting.splice(0)) this.settle(seq);
    for (const seq of this.running) seq.abort.abort();
    for (const waiter of this.waiters) waiter.resolve();
    this.waiters.clear();
    this.gpu?.dispose();
  }

  // ---- plumbing ----

  scaled(ms: number): number {
    return ms * this.options.timeScale;
  }

  /** Runs a utility call after the ones before it, as vLLM's engine core does. */
  private control<T>(operation: () => Promise<T>): Promise<T> {
    const result = this.controlTail.then(async () => {
      if (this.phase === "dead") throw new AbortedError();
      this.setBlocking(+1);
      try {
        return await operation();
      } finally {
        this.setBlocking(-1);
      }
    });
    this.controlTail = result.catch(() => {});
    return result;
  }

  private setBlocking(delta: number): void {
    this.blocking += delta;
    if (this.blocking === 0) this.stateChanged();
  }

  private waitUntil(ready: () => boolean, signal: AbortSignal): Promise<void> {
    if (ready()) return Promise.resolve();
    if (signal.aborted) return Promise.reject(new AbortedError());
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        ready,
        resolve: () => {
          signal.removeEventListener("abort", onAbort);
          if (signal.aborted || this.phase === "dead") reject(new AbortedError());
          else resolve();
        },
      };
      const onAbort = () => {
        this.waiters.delete(waiter);
        reject(new AbortedError());
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.add(waiter);
    });
  }

  private stateChanged(): void {
    for (const waiter of [...this.waiters]) {
      if (!waiter.ready()) continue;
      this.waiters.delete(waiter);
      waiter.resolve();
    }
    this.pump();
  }
}
