import { setTimeout as delay } from "node:timers/promises";
import { defaultStateDir, stopLeftovers } from "../autoscaler/local/engine-records.ts";
import { LocalPlatform } from "../autoscaler/local/platform.ts";
import { UsageError } from "../lib/cli-flags.ts";
import { maxTimerMs } from "../lib/duration.ts";
import { createLogger, type Logger } from "../lib/log.ts";
import { unwritableDirectory } from "../lib/make-directory.ts";
import { releaseStartupMemory } from "../lib/release-startup-memory.ts";
import { ConfigError, loadConfigFile } from "../lib/settings/index.ts";
import { startTelemetry } from "../lib/telemetry.ts";
import { adminTokenFlags, serverAdminToken } from "./admin-token.ts";
import type { Command } from "./command.ts";
import { watchConfigFile } from "./config-watch.ts";
import { allowedOriginsValue, corsFlags } from "./cors-flags.ts";
import { durationValue, hostValue, listenFlags, portValue } from "./flags.ts";
import { ListenError, startLocalSnooze } from "./local-snooze.ts";
import { missingConfigText } from "./missing-config.ts";
import {
  releaseEarlyStopSignals,
  serveStopSignals,
  stopsWithParent,
  takeEarlyHangUps,
  watchStopSignals,
} from "./signals.ts";

export const serveCommand: Command = {
  name: "serve",
  flags: {
    config: {
      type: "string",
      short: "c",
      default: "snooze.yaml",
      description: "settings file",
      placeholder: "file",
    },
    ...listenFlags(8080),
    ...adminTokenFlags,
    ...corsFlags,
    "shutdown-grace": {
      type: "string",
      default: "30s",
      description: "how long in-flight requests may finish after SIGTERM or SIGINT",
      placeholder: "duration",
    },
    "stop-grace": {
      type: "string",
      default: "10s",
      description: "how long a stopped engine has between SIGTERM and SIGKILL",
      placeholder: "duration",
    },
    "watch-config": {
      type: "boolean",
      description:
        "reload the settings file when it changes, as on SIGHUP (models added, removed and changed without dropping a request)",
    },
    "state-dir": {
      type: "string",
      description:
        "where the record of running engines and what the models learned (learning.json) are kept (default: $SNOOZE_STATE_DIR, else $XDG_STATE_HOME/snooze, else ~/.local/state/snooze)",
      placeholder: "dir",
    },
  },
  async run(values, _positionals, tokens) {
    const port = portValue(values, "port", { fetched: true });
    const host = hostValue(values);
    const grace = durationValue(values, "shutdown-grace");
    const stopGrace = durationValue(values, "stop-grace");
    // `--state-dir "$DIR"` with DIR unset names no directory: taken as written, it was the working
    // directory, which got learning.json and the engine records (found by an outside tester).
    if (values["state-dir"] === "")
      throw new UsageError("--state-dir is empty: name a directory, or leave the flag out for the default");
    // As `--state-dir`: `--config "$FILE"` with FILE unset named no file, and was said as one
    // (`: (top level): cannot read the file: ENOENT ... stat ''`).
    if (values.config === "")
      throw new UsageError(
        "--config is empty: name the settings file, or leave the flag out for snooze.yaml",
      );
    const stateDir = typeof values["state-dir"] === "string" ? values["state-dir"] : defaultStateDir();
    const adminToken = serverAdminToken(values, host);
    const allowedOrigins = allowedOriginsValue(values);
    const log = createLogger({ component: "serve" });
    // Found out at start, not at the shutdown's first write (found by an outside tester: `--state-dir
    // /proc/x` started and only warned when it stopped). One given (the flag, $SNOOZE_STATE_DIR) is a
    // usage mistake; the default under the home directory is warned about, as a read-only home (a
    // container's) ran before and still runs, keeping nothing.
    const cannotWrite = unwritableDirectory(stateDir, 0o700);
    const given =
      typeof values["state-dir"] === "string"
        ? "--state-dir"
        : process.env.SNOOZE_STATE_DIR
          ? "SNOOZE_STATE_DIR"
          : undefined;
    if (cannotWrite && given) {
      // Stopping what a killed predecessor left needs only to read its records: done before the
      // refusal, or the engines recorded there ran on, holding their GPUs and ports, for as long as
      // the directory stayed read-only (found by a probe).
      await stopLeftoversBeforeRefusal(stateDir, log, stopGrace);
      throw new UsageError(
        `${given} ${stateDir} cannot be used, as files cannot be written there: ${cannotWrite}`,
      );
    }
    if (cannotWrite)
      log.warn(
        "the state directory cannot be written: the record of running engines and what the models learn are not kept (--state-dir names another)",
        { stateDir, error: cannotWrite },
      );
    let config: Awaited<ReturnType<typeof loadConfigFile>>;
    try {
      // Its own port is no engine's: refused here, with the file's line, not at the engine's start.
      config = await loadConfigFile(String(values.config), port === 0 ? {} : { listenPort: port });
    } catch (error) {
      if (error instanceof ConfigError) {
        const given = tokens.some((token) => token.kind === "option" && token.name === "config");
        const missing = missingConfigText(error, given);
        console.error(`snooze serve: ${missing ?? `the settings file is not valid:\n${error.message}`}`);
        return 2;
      }
      throw error;
    }
    // From here on every stop signal, and the parent's exit (see stopsWithParent), leads through
    // the shutdown below.
    const signals = watchStopSignals(
      log,
      { graceMs: grace },
      {
        signals: serveStopSignals,
        parentPollMs: stopsWithParent() ? 1_000 : 0,
        watchGrandparent: process.env.npm_command !== undefined,
      },
    );
    // SIGHUP is handled from here on (Node's default would end Snooze without stopping its engines):
    // it reloads the settings once Snooze serves (one that came before, while it loaded or started,
    // then too) and is ignored during the shutdown.
    const file = String(values.config);
    let hungUpEarly = false;
    let reload: (cause: string) => void = () => {
      hungUpEarly = true;
    };
    const onHangUp = () => reload("SIGHUP");
    process.on("SIGHUP", onHangUp);
    if (takeEarlyHangUps()) reload("SIGHUP");
    try {
      const platform = new LocalPlatform(config.models.values(), log, { stopGraceMs: stopGrace, stateDir });
      // Before any port is bound: a killed predecessor's engines would hold fixed engine ports.
      // A stop signal meanwhile kills them at once and ends Snooze here, before it serves: the
      // wait could last the whole stop grace, and Snooze then bound its port only to shut down
      // (found by an outside tester).
      const stopping = new AbortController();
      void signals.first.then(() => stopping.abort());
      await platform.stopLeftovers(stopping.signal);
      if (stopping.signal.aborted) return 0;
      const telemetry = await startTelemetry("snooze-serve", log);
      let snooze: Awaited<ReturnType<typeof startLocalSnooze>>;
      try {
        snooze = await startLocalSnooze({
          config,
          log,
          host,
          port,
          adminToken,
          allowedOrigins,
          platform,
          stateDir,
          flushSpans: () => telemetry.shutdown(),
        });
      } catch (error) {
        if (!(error instanceof ListenError)) throw error;
        console.error(`snooze serve: ${error.message}`);
        await telemetry.shutdown();
        return 1;
      }
      log.info("listening", { url: snooze.url, models: [...config.models.keys()], pid: process.pid });
      // Start-up's garbage (the young generation it grew) goes back to the system before idling.
      releaseStartupMemory();
      // SIGHUP, and with --watch-config a changed file, reload the settings (a bad file changes nothing).
      reload = (cause) =>
        void snooze.models
          ?.reload(file, cause)
          .catch((error: unknown) => log.error("reloading the settings failed", { error }));
      if (hungUpEarly) {
        log.info("SIGHUP came while Snooze started: reloading the settings now");
        reload("SIGHUP");
      }
      const watcher = values["watch-config"]
        ? watchConfigFile(file, () => reload("file changed"), { log })
        : undefined;
      await signals.first;
      watcher?.close();
      reload = () => log.info("SIGHUP during the shutdown: ignored");
      const started = Date.now();
      // Held requests are answered, in-flight ones get the grace, then engines get the stop grace;
      // a second signal, or overrunning both graces, kills the engines at once (which ends their
      // in-flight responses with an error).
      const outcome = await Promise.race([
        snooze.close(grace).then(() => "done" as const),
        signals.second.then(() => "now" as const),
        // Held to the longest a timer waits (found by an outside tester: both graces near it
        // overflowed, and the guard fired at once, killing the streams the grace was for).
        delay(Math.min(grace + stopGrace + 2_000, maxTimerMs), "late" as const, { ref: false }),
      ]);
      if (outcome !== "done") {
        if (outcome === "late")
          log.warn("the shutdown overran its graces; killing the engines", { grace, stopGrace });
        // The requests in flight are told Snooze shut down before their engines die under them
        // (else they would read as an engine that broke off: `upstream_broken`).
        await snooze.endInFlight();
        await platform.kill();
        await Promise.race([snooze.close(0), delay(1_000, undefined, { ref: false })]);
      }
      await telemetry.shutdown();
      log.info("stopped", { ms: Date.now() - started });
      return outcome === "done" ? 0 : 1;
    } finally {
      signals.dispose();
      process.off("SIGHUP", onHangUp);
    }
  },
};

/**
 * Stops the engines a killed snooze serve recorded in a state directory this one cannot write, before
 * it refuses to start: the records are read, the engines stopped (their records stay). A stop signal
 * meanwhile kills them at once rather than leaving them after a bare SIGTERM.
 */
async function stopLeftoversBeforeRefusal(stateDir: string, log: Logger, graceMs: number): Promise<void> {
  const cut = new AbortController();
  releaseEarlyStopSignals();
  for (const signal of serveStopSignals) process.on(signal, () => cut.abort());
  await stopLeftovers(stateDir, log, graceMs, cut.signal);
}
