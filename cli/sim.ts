import { runSim } from "../hack/sim/launcher.ts";
import { parseSimFlags, simFlags } from "../hack/sim/options.ts";
import { createLogger } from "../lib/log.ts";
import type { Command } from "./command.ts";

/** `snooze sim`: a vLLM simulator with vLLM's flags, OpenAI API, sleep API and metrics. See docs/simulator.md. */
export const simCommand: Command = {
  name: "sim",
  flags: simFlags,
  positionals: "[model]",
  run(values, positionals, tokens) {
    const launch = parseSimFlags(values, positionals, tokens);
    return runSim(launch, createLogger({ component: "sim" }));
  },
};
