import { activatorCommand } from "./activator.ts";
import { autoscalerCommand } from "./autoscaler.ts";
import type { Command } from "./command.ts";
import { serveCommand } from "./serve.ts";
import { simCommand } from "./sim.ts";
import { statusCommand } from "./status.ts";
import { webhooksCommand } from "./webhooks.ts";

/** Every `snooze` command, in the order `snooze --help` lists them. */
export const commands: Command[] = [
  serveCommand,
  statusCommand,
  simCommand,
  webhooksCommand,
  activatorCommand,
  autoscalerCommand,
];
