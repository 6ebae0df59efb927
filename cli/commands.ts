import type { Command } from "./command.ts";

/**
 * A `snooze` command by name and summary; its module (and all it imports) loads only when it runs.
 * The summary lives here, not in the module, so `snooze --help` lists every command without
 * loading any of them (issue 14: it loaded the servers' imports and took about 2 s).
 */
export interface CommandEntry {
  name: string;
  summary: string;
  load(): Promise<Command>;
  /**
   * A server that shuts down gracefully on SIGTERM/SIGINT (an early one, while it loads, exits 0);
   * once its shutdown is done, whatever is still open gets a second before the process exits.
   */
  server?: true;
  /** SIGHUP reloads its settings: one that comes while it loads is kept for when it serves. */
  reloads?: true;
  /**
   * Runs until stopped, its log on stderr (every server, and `snooze sim`): once it runs, a stdout or
   * stderr that fails (a reader gone, a full disk) costs the lines written there, not the process.
   */
  untilStopped?: true;
}

/**
 * Every `snooze` command, in the order `snooze --help` lists them. Loading is lazy: `snooze sim`
 * (every simulated engine) and the client commands do not pay for the servers' imports
 * (OpenTelemetry, the Kubernetes client, the activator and autoscaler).
 */
export const commands: CommandEntry[] = [
  {
    name: "serve",
    summary:
      "Run the activator and the autoscaler in one process; engines start, sleep, wake and stop on demand.",
    load: async () => (await import("./serve.ts")).serveCommand,
    server: true,
    reloads: true,
    untilStopped: true,
  },
  {
    name: "status",
    summary:
      "Show each model's tier, held and in-flight requests, next tier change, and last wake and start times.",
    load: async () => (await import("./status.ts")).statusCommand,
  },
  {
    name: "wake",
    summary: "Wake (or start) a model now and wait until it is ready, showing each step.",
    load: async () => (await import("./model-commands.ts")).wakeCommand,
  },
  {
    name: "sleep",
    summary:
      "Drain a model and put its engines to sleep until the next request (stop them without sleep mode).",
    load: async () => (await import("./model-commands.ts")).sleepCommand,
  },
  {
    name: "stop",
    summary: "Drain a model and stop its engines until the next request.",
    load: async () => (await import("./model-commands.ts")).stopCommand,
  },
  {
    name: "logs",
    summary: "Print a model's engine output (stdout and stderr); -f follows it.",
    load: async () => (await import("./model-commands.ts")).logsCommand,
  },
  {
    name: "sim",
    summary: "Simulate a vLLM server (OpenAI API, sleep mode, metrics, shared GPU, faults) without a GPU",
    load: async () => (await import("./sim.ts")).simCommand,
    untilStopped: true,
  },
  {
    name: "webhooks",
    summary:
      "Run the admission webhooks (validation, one resident per slot, replicas=1 pinning, pod sleep mode) over HTTPS.",
    load: async () => (await import("./webhooks.ts")).webhooksCommand,
    server: true,
    untilStopped: true,
  },
  {
    name: "activator",
    summary:
      "Run the data plane on Kubernetes: route OpenAI requests to ready pods of Models, hold them while the autoscaler wakes one.",
    load: async () => (await import("./activator.ts")).activatorCommand,
    server: true,
    untilStopped: true,
  },
  {
    name: "autoscaler",
    summary:
      "Run the control plane on Kubernetes: wake, sleep, scale and arbitrate the pods of Models (one Lease holder per slot or Model).",
    load: async () => (await import("./autoscaler.ts")).autoscalerCommand,
    server: true,
    untilStopped: true,
  },
];
