import { hostname } from "node:os";
import { Activator } from "../activator/activator.ts";
import { type AdminActions, AdminActionUnfinished, SleepStoppedInstead } from "../activator/admin.ts";
import { type Listening, listenActivator } from "../activator/listen.ts";
import { createActivatorServer } from "../activator/server.ts";
import type { Autoscaler } from "../autoscaler/autoscaler.ts";
import { inProcessControlPlane, localAutoscaler } from "../autoscaler/local/control-plane.ts";
import { LocalPlatform } from "../autoscaler/local/platform.ts";
import type { Platform } from "../autoscaler/platform.ts";
import type { Clock } from "../lib/clock.ts";
import { eventSourceOf } from "../lib/cloudevents.ts";
import type { Logger } from "../lib/log.ts";
import { Registry } from "../lib/prometheus.ts";
import type { SnoozeConfig } from "../lib/settings/index.ts";
import { listenFailure } from "./flags.ts";
import { LocalModels } from "./local-models.ts";

/** The activator could not open its port. */
export class ListenError extends Error {}

export interface LocalSnoozeOptions {
  config: SnoozeConfig;
  log: Logger;
  host: string;
  port: number;
  platform?: Platform;
  clock?: Clock;
  statsIntervalMs?: number;
  /** Where what the models learned is kept across restarts; none: not kept. */
  stateDir?: string;
  /** The bearer token of the admin API and the events endpoint (see activator/admin-guard.ts). */
  adminToken?: string;
  /** Origins whose browser pages may call `/v1/` (`--allowed-origins`; activator/cors.ts). */
  allowedOrigins?: readonly string[];
  /**
   * Sends the last spans at shutdown (lib/telemetry.ts `shutdown`): it runs while the last
   * CloudEvents go to the sink, not after them.
   */
  flushSpans?: () => Promise<unknown>;
}

export interface LocalSnooze {
  url: string;
  activator: Activator;
  autoscaler: Autoscaler;
  registry: Registry;
  platform: Platform;
  /** The owner of the models after start: config reloads go through it (with a local platform). */
  models?: LocalModels;
  /**
   * Graceful: answer held requests (and new ones: 503 shutting_down), let in-flight ones finish,
   * stop the engines, then stop listening.
   */
  close(graceMs?: number): Promise<void>;
  /**
   * During `close`, ends the requests in flight at once (`shutting_down`), as its grace's end
   * would: call it before killing the engines of a forced stop. Resolves once their answers left (1 s at most).
   */
  endInFlight(): Promise<void>;
}

/**
 * Admin actions on the in-process control plane; engine output where the platform keeps it; the last
 * refused reload of the settings file where they are reloaded.
 */
export function localAdmin(
  autoscaler: Autoscaler,
  platform?: Platform,
  models?: Pick<LocalModels, "reloadFailure" | "onReloadFailure">,
): AdminActions {
  const controller = (model: string) => {
    const found = autoscaler.controller(model);
    if (!found) throw new Error(`no model ${model}`);
    return found;
  };
  /** A person's sleep or stop: resolves once done, else says the model is still awake. */
  const park = async (verb: "sleep" | "stop", model: string) => {
    const found = controller(model);
    const outcome = await (verb === "sleep" ? found.sleepNow() : found.stopNow());
    if (outcome === "stopped-instead") throw new SleepStoppedInstead(model, found.sleepFailed());
    if (outcome !== "done")
      throw new AdminActionUnfinished(verb, model, found.tier, outcome === "taken-back");
  };
  return {
    wake: (model, options) => controller(model).wakeNow(undefined, options?.caller),
    prewarm: (model, forMs, options) => controller(model).prewarm(forMs, undefined, options),
    sleep: (model) => park("sleep", model),
    stop: (model) => park("stop", model),
    slots: async () => autoscaler.slotStatuses(),
    details: (model) => {
      const controller = autoscaler.controller(model);
      const state = controller?.state();
      const next = controller?.nextChange();
      return state
        ? {
            // The control plane's summary, as snooze_replica_tier and the Model's status say it: a
            // start that waits for its engine (a fixed port still held) is `starting`, where the
            // replica events the activator hears say nothing yet.
            tier: state.tier,
            lastStartMs: state.lastStartMs,
            lastWakeMs: state.lastWakeMs,
            lastError: state.lastError,
            ...(state.learning ? { learning: state.learning } : {}),
            // The control plane's own word, none included (a prewarm, work, only a request).
            nextChange: next ? { tier: next.tier, at: new Date(next.at).toISOString() } : null,
          }
        : {};
    },
    ...(platform instanceof LocalPlatform
      ? { logs: async (model: string) => platform.logs(autoscaler.controller(model)?.key ?? model) }
      : {}),
    ...(models
      ? {
          reloadFailure: () => models.reloadFailure,
          onReloadFailure: (listener: () => void) => models.onReloadFailure(listener),
        }
      : {}),
  };
}

/** `snooze serve`: the activator and the autoscaler in one process, engines as child processes. */
export async function startLocalSnooze(options: LocalSnoozeOptions): Promise<LocalSnooze> {
  const registry = new Registry();
  const eventSource = eventSourceOf("snooze", hostname());
  const platform = options.platform ?? new LocalPlatform(options.config.models.values(), options.log);
  const autoscaler = localAutoscaler({
    config: options.config,
    platform,
    log: options.log,
    registry,
    clock: options.clock,
    eventSource,
    stateDir: options.stateDir,
  });
  const activator = new Activator({
    // A copy of its own: the activator changes its models and names as they are reloaded.
    config: activatorCopy(options.config),
    controlPlane: inProcessControlPlane(autoscaler),
    registry,
    log: options.log,
    statsIntervalMs: options.statsIntervalMs,
  });
  let listenPort: number | undefined;
  const models =
    platform instanceof LocalPlatform
      ? new LocalModels({
          listenPort: () => listenPort,
          config: options.config,
          platform,
          autoscaler,
          activator,
          log: options.log,
          registry,
          eventSource,
        })
      : undefined;
  const server = createActivatorServer({
    activator,
    admin: localAdmin(autoscaler, platform, models),
    registry,
    adminToken: options.adminToken,
    allowedOrigins: options.allowedOrigins,
    log: options.log,
  });
  const stopAll = async () => {
    // Local engines stop with Snooze: the control plane says so (stopped events) before they go.
    const closing = autoscaler.close({ enginesStop: platform instanceof LocalPlatform });
    // Its activations ended in close's first, synchronous part: the last spans go to the collector
    // while the last events go to the sink, each within its own 2 s, not one after the other (a dead
    // sink and a dead collector made a stop 4 s longer, found by an outside tester).
    const flushing = options.flushSpans?.();
    await closing;
    await platform.close();
    await flushing;
  };
  let listening: Listening;
  try {
    listening = await listenActivator(server, { port: options.port, host: options.host });
  } catch (error) {
    await activator.shutdown(0);
    await stopAll();
    const failure = listenFailure(error, options.host, options.port);
    throw new ListenError(
      failure?.message ?? `cannot listen on ${options.host}:${options.port}: ${(error as Error).message}`,
    );
  }
  const { port } = listening.address;
  listenPort = port;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    activator,
    autoscaler,
    registry,
    platform,
    models,
    close(graceMs = 30_000) {
      closing ??= (async () => {
        models?.stopReloads();
        // The port stays Snooze's until its engines are gone: meanwhile a new request is answered
        // 503 shutting_down, `/readyz` 503, and the admin API (`snooze status`) says Snooze is
        // shutting down (found by an outside tester: a refused connection made the CLI ask "is
        // Snooze running?" during the drain).
        await activator.shutdown(graceMs);
        server.closeAllConnections();
        await stopAll();
        listening.close();
        server.closeAllConnections();
      })();
      return closing;
    },
    endInFlight: () => activator.endInFlight(),
  };
}

/** The settings as the activator keeps them: its own maps and model objects, the rest shared. */
function activatorCopy(config: SnoozeConfig): SnoozeConfig {
  return {
    ...config,
    models: new Map([...config.models].map(([id, model]) => [id, { ...model }])),
    names: new Map(config.names),
  };
}
