import type { Activator } from "../activator/activator.ts";
import { maxReloadProblems, type ReloadFailure } from "../activator/admin.ts";
import type { Autoscaler } from "../autoscaler/autoscaler.ts";
import {
  addLocalModel,
  localActivator,
  localEventSink,
  localTarget,
} from "../autoscaler/local/control-plane.ts";
import type { LocalPlatform } from "../autoscaler/local/platform.ts";
import type { Logger } from "../lib/log.ts";
import { Counter, type Registry } from "../lib/prometheus.ts";
import {
  type ChangedModel,
  type ConfigDiff,
  ConfigError,
  diffConfig,
  isEmptyDiff,
  loadConfigFileOffLoop,
  type ModelConfig,
  type SnoozeConfig,
} from "../lib/settings/index.ts";

/** What a reload did. */
export type ReloadResult =
  | { result: "applied"; diff: ConfigDiff }
  | { result: "unchanged" }
  /** The shutdown began before the file was read and applied: nothing is (`stopReloads`). */
  | { result: "dropped" }
  | { result: "invalid"; error: ConfigError };

export interface LocalModelsOptions {
  /** The settings in use at start (already built into the platform, autoscaler and activator). */
  config: SnoozeConfig;
  platform: Pick<LocalPlatform, "setModel" | "removeModel">;
  autoscaler: Autoscaler;
  activator: Activator;
  log: Logger;
  registry: Registry;
  /** The source of outgoing CloudEvents, for a sink a reload builds. */
  eventSource: string;
  /** The port Snooze listens on, once it does: a reload that gives it to an engine is refused. */
  listenPort?: () => number | undefined;
}

/** Time a model's engines get to go after the drain, beyond its drainTimeout, before it is moved anyway. */
const goneMarginMs = 60_000;

/**
 * The one owner of local mode's models after start: a config reload (SIGHUP, `--watch-config`)
 * becomes a diff of the settings in use and the new ones (`diffConfig`), applied here to the three
 * that hold a model: the platform (its engine command), the autoscaler (its controller and slot)
 * and the activator (its route and names). No held or in-flight request is dropped: an added model
 * serves at once; a removed one takes no new requests but serves what it holds and runs, then its
 * engine stops; a changed command drains the engine and starts it anew (requests wait meanwhile);
 * other settings go to the running controller and route, and the engine keeps running.
 *
 * Work on one model runs in order (a model removed and added back waits for its removal); models
 * do not wait for one another.
 */
export class LocalModels {
  private applied: SnoozeConfig;
  private readonly options: LocalModelsOptions;
  private readonly log: Logger;
  private readonly reloads: Counter<"result">;
  /** Per model, the work under way (a removal or a slot move), which later work on it waits for. */
  private readonly chains = new Map<string, Promise<void>>();
  /** One reload at a time: a second SIGHUP waits for the first one's file to be read and applied. */
  private reloading: Promise<unknown> = Promise.resolve();
  /** The reload waiting for its turn (it has not read the file yet), which later asks join. */
  private waiting: { file: string; result: Promise<ReloadResult> } | undefined;
  /** The last reload, while it stands refused: the file on disk is not what runs. */
  private failure: ReloadFailure | undefined;
  private readonly failureListeners = new Set<() => void>();
  /** Set once the shutdown began (`stopReloads`). */
  private stopped = false;

  constructor(options: LocalModelsOptions) {
    this.options = options;
    this.applied = options.config;
    this.log = options.log.child({ component: "config" });
    this.reloads = new Counter({
      name: "snooze_config_reloads_total",
      help: "Settings file reloads (SIGHUP or --watch-config), by result: applied, unchanged, invalid.",
      labelNames: ["result"],
      registers: [options.registry],
    });
    for (const result of ["applied", "unchanged", "invalid"]) this.reloads.inc({ result }, 0);
    this.warnUnused(options.config);
  }

  /** The file is valid, but says things that never happen: one warning naming each, where it is. */
  private warnUnused(config: SnoozeConfig): void {
    if (config.warnings?.length)
      this.log.warn("settings that never take effect", { settings: config.warnings });
  }

  /** The settings in use. */
  get config(): SnoozeConfig {
    return this.applied;
  }

  /**
   * The last reload, when it was refused (the settings in use stayed) and none applied since: the
   * admin API, `snooze status` and the status page show it, as the log alone is easily missed.
   */
  get reloadFailure(): ReloadFailure | undefined {
    return this.failure;
  }

  /** Calls `listener` whenever `reloadFailure` comes, changes or goes; returns what stops it. */
  onReloadFailure(listener: () => void): () => void {
    this.failureListeners.add(listener);
    return () => this.failureListeners.delete(listener);
  }

  private setFailure(failure: ReloadFailure | undefined): void {
    if (failure === undefined && this.failure === undefined) return;
    this.failure = failure;
    for (const listener of this.failureListeners) {
      try {
        listener();
      } catch (error) {
        this.log.warn("a listener of the reload's outcome failed", { error });
      }
    }
  }

  /**
   * Reads `file` again and applies what changed. A file that does not load (unreadable, invalid
   * YAML, a setting that fails validation) changes nothing: the settings in use stay, and the log
   * says why, one line per problem as `file:line:column: key: reason`. A large file is parsed on a
   * worker thread (`loadConfigFileOffLoop`): requests are proxied and streams flow meanwhile.
   *
   * A reload asked while another waits for its turn joins that one, which reads the file after both
   * asks: a burst of SIGHUPs (a script's loop, a supervisor's retries) was a reload for each, one
   * after another, each parsing the file on the event loop (found by an outside tester: 300 SIGHUPs
   * made 108 reloads).
   */
  reload(file: string, cause: string): Promise<ReloadResult> {
    if (this.waiting?.file === file) return this.waiting.result;
    const next = this.reloading.then(async (): Promise<ReloadResult> => {
      this.waiting = undefined;
      if (this.stopped) return this.dropped(file, cause);
      let config: SnoozeConfig;
      try {
        const listenPort = this.options.listenPort?.();
        config = await loadConfigFileOffLoop(file, listenPort === undefined ? {} : { listenPort });
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        this.reloads.inc({ result: "invalid" });
        const problems = error.message.split("\n");
        this.log.error("the settings file is not valid; the settings in use stay", { file, cause, problems });
        const shown = problems.slice(0, maxReloadProblems);
        if (problems.length > shown.length)
          shown.push(`… and ${problems.length - shown.length} more (the log lists them all)`);
        this.setFailure({ at: new Date().toISOString(), cause, file, problems: shown });
        return { result: "invalid", error };
      }
      // A large file takes seconds to parse, and the shutdown may have begun meanwhile.
      if (this.stopped) return this.dropped(file, cause);
      this.setFailure(undefined);
      const outcome = this.apply(config);
      this.reloads.inc({ result: outcome.result });
      if (outcome.result !== "unchanged") this.warnUnused(config);
      if (outcome.result === "unchanged")
        this.log.info("settings reloaded: nothing changed", { file, cause });
      else this.log.info("settings reloaded", { file, cause, ...summary(outcome.diff) });
      return outcome;
    });
    this.reloading = next.catch(() => {});
    this.waiting = { file, result: next };
    return next;
  }

  /**
   * The shutdown began: a reload under way or asked from now on applies nothing, lest it start or
   * restart engines as they are being stopped (a large file is parsed on a worker thread for
   * seconds, and a SIGTERM can come meanwhile).
   */
  stopReloads(): void {
    this.stopped = true;
  }

  private dropped(file: string, cause: string): ReloadResult {
    this.log.info("the shutdown began: the settings file is not reloaded", { file, cause });
    return { result: "dropped" };
  }

  /** Applies new (valid) settings: the diff from the ones in use, model by model. */
  apply(next: SnoozeConfig): Extract<ReloadResult, { result: "applied" | "unchanged" }> {
    const before = this.applied;
    const diff = diffConfig(before, next);
    if (isEmptyDiff(diff)) return { result: "unchanged" };
    this.applied = next;
    const { activator, autoscaler } = this.options;
    activator.setLimits({
      maxBodySize: next.maxBodySize,
      maxHeldBytes: next.maxHeldBytes,
      bodyTimeout: next.bodyTimeout,
    });
    autoscaler.setHostMemoryBudget(next.hostMemoryBudget);
    if (diff.global.includes("eventSink") || diff.global.includes("eventMode")) {
      const { log, registry, eventSource: source } = this.options;
      autoscaler.setSink(localEventSink(next, { source, log, registry }));
    }
    for (const slot of diff.slots) autoscaler.updateSlot(slot.name, slot);
    // Removed models give up their names first, so that a name may pass to another model.
    for (const id of diff.removed) this.after(id, () => this.remove(id, before.models.get(id)!));
    activator.setNames(next.names);
    activator.setOrder([...next.models.keys()]);
    for (const { config } of diff.updated) this.after(config.id, () => this.update(config));
    for (const { config, keys } of diff.restarted) {
      const old = before.models.get(config.id)!;
      this.after(config.id, () => (keys.includes("slot") ? this.move(old, config) : this.restart(config)));
    }
    for (const config of diff.added) this.after(config.id, () => this.add(config));
    return { result: "applied", diff };
  }

  /** Resolves once the work under way on every model (removals, moves) is done. */
  async settled(): Promise<void> {
    while (this.chains.size > 0) await Promise.all(this.chains.values());
  }

  /**
   * Runs `work` on model `id` now (so that the next request sees the new settings), or after the
   * work under way on it; work that takes time is tracked until it is done.
   */
  private after(id: string, work: () => void | Promise<void>): void {
    const failed = (error: unknown) =>
      this.log.error("applying the new settings of a model failed", { model: id, error });
    const pending = this.chains.get(id);
    let running: Promise<void>;
    if (pending) running = pending.then(work).catch(failed);
    else {
      let result: void | Promise<void>;
      try {
        result = work();
      } catch (error) {
        failed(error);
        return;
      }
      if (!(result instanceof Promise)) return;
      running = result.catch(failed);
    }
    const tracked = running.finally(() => {
      if (this.chains.get(id) === tracked) this.chains.delete(id);
    });
    this.chains.set(id, tracked);
  }

  private add(config: ModelConfig): void {
    const { platform, autoscaler, activator } = this.options;
    platform.setModel(config);
    addLocalModel(autoscaler, this.applied, config);
    activator.upsertModel({ ...config });
    this.log.info("model added", { model: config.id });
  }

  private update(config: ModelConfig): void {
    const { platform, autoscaler, activator } = this.options;
    platform.setModel(config);
    autoscaler.updateModel(localTarget(config));
    activator.upsertModel({ ...config });
  }

  /** A new command (env, port, sleep mode): the running engine drains and is replaced (ModelController). */
  private restart(config: ModelConfig): void {
    const { platform, autoscaler, activator } = this.options;
    platform.setModel(config, { restart: true });
    autoscaler.updateModel(localTarget(config));
    autoscaler.controllerByKey(config.id)?.engineChanged();
    activator.upsertModel({ ...config });
  }

  /**
   * To another slot (or into or out of one): the engine drains and stops under the old slot, no new
   * one starts there (at most 0 replicas), then the model joins its new slot; requests wait meanwhile.
   */
  private async move(old: ModelConfig, config: ModelConfig): Promise<void> {
    const { platform, autoscaler, activator } = this.options;
    platform.setModel(config, { restart: true });
    autoscaler.updateModel({ ...localTarget(old), maxReplicas: 0 });
    if (config.slot !== undefined) autoscaler.arriving(config.slot, old.id);
    activator.upsertModel({ ...config });
    const leaving = autoscaler.controllerByKey(old.id);
    await leaving?.untilGone(old.drainTimeout + goneMarginMs);
    // The shutdown closed the controller: the engine is being stopped with the others, and a
    // controller added now would take it up again as starting (found by a probe).
    if (this.stopped) return;
    // What it learned (a prewarm's window too), and a wake asked meanwhile (the controller that
    // leaves, at most 0 replicas, could not act on it), as the held requests' demand below.
    const handOver = leaving?.handOver();
    autoscaler.removeModel(old.id);
    const joined = addLocalModel(autoscaler, this.applied, config);
    if (handOver) joined.takeOver(handOver);
    if ((activator.routes.get(config.id)?.held ?? 0) > 0) autoscaler.demand(localActivator, config.id);
    this.log.info("model moved", { model: config.id, from: old.slot ?? null, to: config.slot ?? null });
  }

  /** Gone from the file: no new requests; held and in-flight ones are served; then the engine stops. */
  private async remove(id: string, old: ModelConfig): Promise<void> {
    const { platform, autoscaler, activator } = this.options;
    await activator.retireModel(id);
    await autoscaler.controllerByKey(id)?.stopNow(old.drainTimeout + goneMarginMs);
    autoscaler.removeModel(id);
    await platform.removeModel(id);
    activator.removeModel(id);
    autoscaler.forgetModel(id);
    this.log.info("model removed", { model: id });
  }
}

function summary(diff: ConfigDiff): Record<string, unknown> {
  const ids = (list: ChangedModel[]) => list.map((c) => `${c.config.id} (${c.keys.join(", ")})`);
  return {
    ...(diff.added.length ? { added: diff.added.map((m) => m.id) } : {}),
    ...(diff.removed.length ? { removed: diff.removed } : {}),
    ...(diff.restarted.length ? { restarted: ids(diff.restarted) } : {}),
    ...(diff.updated.length ? { updated: ids(diff.updated) } : {}),
    ...(diff.slots.length ? { slots: diff.slots.map((s) => s.name) } : {}),
    ...(diff.global.length ? { settings: diff.global } : {}),
  };
}
