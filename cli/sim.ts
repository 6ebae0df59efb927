import { runSim } from "../hack/sim/launcher.ts";
import { parseSimFlags, simFlags } from "../hack/sim/options.ts";
import { ignoredFlag, simArgsFromVllm } from "../hack/sim/vllm-args.ts";
import { createLogger } from "../lib/log.ts";
import type { Command } from "./command.ts";

/** `snooze sim`: a vLLM simulator with vLLM's flags, OpenAI API, sleep API and metrics. See docs/simulator.md. */
export const simCommand: Command = {
  name: "sim",
  flags: simFlags,
  positionals: "[model]",
  // A `vllm serve` command line works as it is: vLLM's flags that change nothing here are taken.
  rewriteArgs: (argv) => simArgsFromVllm(argv, simFlags),
  run(values, positionals, tokens) {
    const launch = parseSimFlags(values, positionals, tokens);
    const logger = createLogger({ component: "sim" });
    const ignored = (values[ignoredFlag] as string[] | undefined) ?? [];
    // Once, so that a user who passed them knows they change nothing in the simulator.
    if (ignored.length > 0) logger.info("vLLM flags without effect in the simulator", { flags: ignored });
    return runSim(launch, logger);
  },
};
