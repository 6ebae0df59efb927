import type { Command } from "./command.ts";

/** A `snooze` command by name; its module (and all it imports) loads only when it runs. */
export interface CommandEntry {
  name: string;
  load(): Promise<Command>;
}

/**
 * Every `snooze` command, in the order `snooze --help` lists them. Loading is lazy: `snooze sim`
 * (every simulated engine) and the client commands do not pay for the servers' imports
 * (OpenTelemetry, the Kubernetes client, the activator and autoscaler).
 */
export const commands: CommandEntry[] = [
  { name: "serve", load: async () => (await import("./serve.ts")).serveCommand },
  { name: "status", load: async () => (await import("./status.ts")).statusCommand },
  { name: "wake", load: async () => (await import("./model-commands.ts")).wakeCommand },
  { name: "sleep", load: async () => (await import("./model-commands.ts")).sleepCommand },
  { name: "stop", load: async () => (await import("./model-commands.ts")).stopCommand },
  { name: "logs", load: async () => (await import("./model-commands.ts")).logsCommand },
  { name: "sim", load: async () => (await import("./sim.ts")).simCommand },
  { name: "webhooks", load: async () => (await import("./webhooks.ts")).webhooksCommand },
  { name: "activator", load: async () => (await import("./activator.ts")).activatorCommand },
  { name: "autoscaler", load: async () => (await import("./autoscaler.ts")).autoscalerCommand },
];
