/**
 * Runs `snooze sim` in the foreground: one engine like `vllm serve`, or
 * `--engines N` engines on consecutive ports for scale tests, each with its
 * own state and (with `--gpu-id`) its own claim on the simulated GPU.
 */
import { type StopCause, stopsWithParent, watchParentExit } from "../../cli/signals.ts";
import type { Logger } from "../../lib/log.ts";
import { releaseStartupMemory } from "../../lib/release-startup-memory.ts";
import { SimStartError } from "./engine.ts";
import type { LaunchOptions, SimOptions } from "./options.ts";
import { type SimHandle, startSim } from "./server.ts";

/** The options of engine `index` of a launch. */
export function engineOptions(launch: LaunchOptions, index: number): SimOptions {
  const base = launch.engine;
  if (launch.engines === 1) return base;
  return {
    ...base,
    port: launch.basePort + index,
    // Every engine serves its own model: the names get the engine's index.
    servedModelNames: base.servedModelNames.map((name) => `${name}-${index}`),
    gpu: base.gpu ? { ...base.gpu, id: launch.gpuIds[index % launch.gpuIds.length]! } : undefined,
    faults: { ...base.faults },
  };
}

/**
 * Starts the engines and serves until SIGINT or SIGTERM (exit code 0). A failed
 * start exits 1 with vLLM's error on stderr; an engine that dies takes the
 * process with it when it is the only one, as a crashed `vllm serve` would.
 */
export async function runSim(launch: LaunchOptions, logger: Logger): Promise<number> {
  // Loading engines hold no socket yet; this keeps the process alive meanwhile.
  const keepAlive = setInterval(() => {}, 1 << 30);
  const handles: SimHandle[] = [];
  const closeAll = async () => {
    clearInterval(keepAlive);
    await Promise.all(handles.map((handle) => handle.close()));
  };
  const drainAll = () => Promise.all(handles.map((handle) => handle.drain()));
  // Stop signals are taken from the first moment: one during start-up (Snooze stopping an engine it
  // has just started) is a clean stop once the engines exist, not the default action's death by signal.
  let early: NodeJS.Signals | undefined;
  const onEarlySignal = (signal: NodeJS.Signals) => {
    early ??= signal;
  };
  process.on("SIGINT", onEarlySignal);
  process.on("SIGTERM", onEarlySignal);
  const endEarlyHandling = () => {
    process.off("SIGINT", onEarlySignal);
    process.off("SIGTERM", onEarlySignal);
  };

  try {
    for (let i = 0; i < launch.engines; i++) {
      handles.push(await startSim(engineOptions(launch, i), { waitReady: false, logger }));
    }
    // Start-up's garbage goes back to the system before the engines idle (every engine is a process).
    releaseStartupMemory();
  } catch (error) {
    endEarlyHandling();
    await closeAll();
    if (error instanceof SimStartError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }

  return await new Promise<number>((resolve) => {
    let finished = false;
    const finish = async (code: number) => {
      if (finished) return;
      finished = true;
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      unwatch();
      await closeAll();
      resolve(code);
    };
    let signals = 0;
    const onSignal = (cause: StopCause) => {
      signals += 1;
      if (signals > 1) {
        // A second signal: stop waiting for in-flight requests.
        logger.warn("shutting down now", { signal: cause });
        void closeAll().then(() => resolve(0));
        return;
      }
      if (cause === "parent-exited") logger.warn("the parent process exited; shutting down");
      else logger.info("shutting down: finishing in-flight requests", { signal: cause });
      void drainAll().then(() => finish(0));
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    // Started by npm (`npx snooze sim`), which does not pass SIGTERM on, it stops with its parent
    // as `snooze serve` does, rather than keep its port with no parent (found by a docs walk). Its
    // exit begins the shutdown a first signal would; after a signal it changes nothing.
    const unwatch = watchParentExit(
      {
        parentPollMs: stopsWithParent() ? 1_000 : 0,
        watchGrandparent: process.env.npm_command !== undefined,
      },
      () => {
        if (signals === 0) onSignal("parent-exited");
      },
    );
    endEarlyHandling();
    if (early) onSignal(early);

    Promise.all(handles.map((handle) => handle.ready)).then(
      () => logger.info("ready", { engines: handles.length, urls: handles.slice(0, 3).map((h) => h.url) }),
      (error: Error) => {
        if (finished || signals > 0) return; // Stopped while loading.
        process.stderr.write(`snooze sim: cannot listen: ${error.message}\n`);
        void finish(1);
      },
    );

    let dead = 0;
    for (const handle of handles) {
      void handle.died.then((reason) => {
        dead += 1;
        if (launch.engines === 1 || dead === handles.length) {
          process.stderr.write(`snooze sim: engine died: ${reason}\n`);
          // A crash, not a shutdown: exit at once, like a killed vllm serve.
          process.exit(1);
        }
      });
    }
  });
}
