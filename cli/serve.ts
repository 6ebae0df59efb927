import { createLogger } from "../lib/log.ts";
import { ConfigError, loadConfigFile } from "../lib/settings/index.ts";
import { startTelemetry } from "../lib/telemetry.ts";
import { adminTokenFlags, serverAdminToken } from "./admin-token.ts";
import type { Command } from "./command.ts";
import { durationValue, listenFlags, portValue } from "./flags.ts";
import { ListenError, startLocalSnooze } from "./local-snooze.ts";
import { untilStopSignal } from "./signals.ts";

export const serveCommand: Command = {
  name: "serve",
  summary:
    "Run the activator and the autoscaler in one process; engines start, sleep, wake and stop on demand.",
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
    "shutdown-grace": {
      type: "string",
      default: "30s",
      description: "how long in-flight requests may finish after SIGTERM",
      placeholder: "duration",
    },
  },
  async run(values) {
    const port = portValue(values);
    const grace = durationValue(values, "shutdown-grace");
    const adminToken = serverAdminToken(values, String(values.host));
    const log = createLogger({ component: "serve" });
    let config: Awaited<ReturnType<typeof loadConfigFile>>;
    try {
      config = await loadConfigFile(String(values.config));
    } catch (error) {
      if (error instanceof ConfigError) {
        console.error(`snooze serve: the settings file is not valid:\n${error.message}`);
        return 2;
      }
      throw error;
    }
    const telemetry = await startTelemetry("snooze-serve");
    let snooze: Awaited<ReturnType<typeof startLocalSnooze>>;
    try {
      snooze = await startLocalSnooze({ config, log, host: String(values.host), port, adminToken });
    } catch (error) {
      if (!(error instanceof ListenError)) throw error;
      console.error(`snooze serve: ${error.message}`);
      await telemetry.shutdown();
      return 1;
    }
    log.info("listening", { url: snooze.url, models: [...config.models.keys()] });
    await untilStopSignal(log, "shutting down", { graceMs: grace });
    await snooze.close(grace);
    await telemetry.shutdown();
    log.info("stopped");
    return 0;
  },
};
