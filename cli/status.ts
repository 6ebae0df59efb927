import type { AdminModelView, ReloadFailure } from "../activator/admin.ts";
import { clip } from "../lib/clip.ts";
import { formatDuration } from "../lib/duration.ts";
import { escapeLineBreakers } from "../lib/json-line.ts";
import { printable } from "../lib/printable.ts";
import { padToWidth, terminalWidth } from "../lib/terminal-width.ts";
import { modelList } from "./answer-shapes.ts";
import { AdminClient, clientFlags, runClient } from "./client.ts";
import type { Command } from "./command.ts";
import { durationValue } from "./flags.ts";
import { outputTaken } from "./output-taken.ts";

/** `snooze status`: what a running Snooze holds, as a table (or JSON); `--watch` keeps it current. */
export const statusCommand: Command = {
  name: "status",
  flags: {
    ...clientFlags,
    json: { type: "boolean", description: "print the admin API's JSON instead of a table" },
    watch: {
      type: "boolean",
      short: "w",
      description: "redraw the table every --interval until interrupted",
    },
    interval: {
      type: "string",
      default: "2s",
      description: "how often --watch asks again",
      placeholder: "duration",
    },
  },
  run: (values) =>
    runClient("status", async () => {
      const client = new AdminClient(values);
      // The admin API's answer as it is (models and slots), for --json; the table shows its models.
      const read = () => client.json<AdminModels>("/snooze/v1/models", modelList);
      // Checked with or without --watch: a mistyped flag is said, not ignored.
      const intervalMs = durationValue(values, "interval", { atLeastMs: 200 });
      if (!values.watch) {
        const answer = await read();
        console.log(
          values.json
            ? escapeLineBreakers(JSON.stringify(answer, null, 2))
            : formatStatus(answer, Date.now()),
        );
        return 0;
      }
      return watch(client.url, read, intervalMs, values.json === true);
    }),
};

/**
 * `GET /snooze/v1/models`: every model, the slots, `shuttingDown` while Snooze shuts down, and a
 * refused reload of the settings file.
 */
interface AdminModels {
  models: AdminModelView[];
  slots?: unknown[];
  shuttingDown?: boolean;
  reloadFailure?: ReloadFailure;
}

/**
 * The table, under a line saying Snooze shuts down when it does (it answers until its engines are
 * gone), and over the last reload of the settings file while it stands refused.
 */
export function formatStatus(answer: AdminModels, now: number): string {
  let text = formatTable(answer.models, now);
  if (answer.shuttingDown === true)
    text = `Snooze is shutting down: it takes no new requests, lets those in flight finish, then stops its engines.\n\n${text}`;
  if (answer.reloadFailure) text = `${text}\n\n${formatReloadFailure(answer.reloadFailure, now)}`;
  return text;
}

/**
 * A refused reload, said under the table: the file on disk is not what runs, which the log alone
 * keeps from whoever reads only `snooze status` (found by an outside tester).
 */
export function formatReloadFailure(failure: ReloadFailure, now: number): string {
  const ago = formatDuration(Math.max(0, now - Date.parse(failure.at)));
  const safe = (text: string) => printable(clip(text, 500), true);
  return [
    `The settings file ${safe(failure.file)} was refused ${ago} ago (${safe(failure.cause)}); Snooze runs the settings it had:`,
    ...failure.problems.map((problem) => `  ${safe(problem)}`),
  ].join("\n");
}

/**
 * Redraws (on a terminal) or appends (otherwise) the table until SIGINT or SIGTERM. A read that
 * fails is said (in the redraw on a terminal, else on stderr) and tried again at the next tick; the
 * exit code says how the last one went: 0, or 1 when Snooze could not be read then.
 */
async function watch(
  url: string,
  read: () => Promise<AdminModels>,
  intervalMs: number,
  json: boolean,
): Promise<number> {
  const tty = process.stdout.isTTY === true && !json;
  let stopped = false;
  let wake: () => void = () => {};
  const stop = () => {
    stopped = true;
    wake();
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  let failed = false;
  try {
    while (!stopped) {
      let text: string;
      try {
        const answer = await read();
        // With --json, one document a line: a U+2028 in an engine's last words split it in two.
        text = json ? escapeLineBreakers(JSON.stringify(answer)) : formatStatus(answer, Date.now());
        failed = false;
      } catch (error) {
        text = `snooze status: ${(error as Error).message}`;
        failed = true;
      }
      if (tty) process.stdout.write(`\x1b[H\x1b[2J${url}  ${new Date().toLocaleTimeString()}\n\n${text}\n`);
      else if (failed) console.error(text);
      else console.log(json ? text : `${text}\n`);
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, intervalMs);
      });
      // A reader that stopped reading is waited for, not queued for (cli/output-taken.ts).
      const abort = new AbortController();
      wake = () => abort.abort();
      if (!stopped) await outputTaken(abort.signal);
    }
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
  return failed ? 1 : 0;
}

/**
 * The NEXT column: what the ladder does next on its own, and in how long (`sleeps in 12s`); while a
 * back-off after failures lasts, when the next try may be (`retry in 40s`).
 */
export function formatNext(model: AdminModelView, now: number): string {
  const retryIn = model.retryAt ? Date.parse(model.retryAt) - now : 0;
  if (retryIn > 0) return `retry in ${formatDuration(retryIn)}`;
  const next = model.nextChange;
  if (!next) return "-";
  const verb =
    next.tier === "cold"
      ? "stops"
      : next.tier === "asleep-2" && model.tier === "asleep-1"
        ? "sleeps deeper"
        : "sleeps";
  const left = Date.parse(next.at) - now;
  return left < 500 ? `${verb} now` : `${verb} in ${formatDuration(left)}`;
}

export function formatTable(models: AdminModelView[], now: number): string {
  const ms = (value?: number) => (value === undefined ? "-" : formatDuration(value));
  // GPU time awake against one replica always awake, when the control plane reports it.
  const gpu = models.some((m) => m.learning !== undefined);
  const gpuCell = (m: AdminModelView) =>
    m.learning
      ? `${formatDuration(Math.round(m.learning.gpuSeconds.awake) * 1000)} (saved ${formatDuration(Math.round(m.learning.gpuSeconds.saved) * 1000)})`
      : "-";
  const rows: string[][] = [
    [
      "MODEL",
      "TIER",
      "FOR",
      "NEXT",
      "HELD",
      "IN-FLIGHT",
      "LAST WAKE",
      "LAST START",
      ...(gpu ? ["GPU AWAKE"] : []),
      "SLOT",
      "LAST ERROR",
    ],
    ...models.map((m) => [
      m.id,
      m.tier,
      formatDuration(Math.max(0, now - Date.parse(m.since))),
      formatNext(m, now),
      String(m.held),
      String(m.inFlight),
      ms(m.lastWakeMs),
      ms(m.lastStartMs),
      ...(gpu ? [gpuCell(m)] : []),
      m.slot ?? "-",
      m.lastError ?? "",
    ]),
  ];
  // The server's words (names, errors) on one line each, safe on a terminal, the header let be.
  for (const row of rows.slice(1))
    for (const [column, cell] of row.entries()) row[column] = printable(clip(cell, 200), true);
  // In terminal columns: a name in Chinese, or with a combining accent, is not as wide as it is long.
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => terminalWidth(row[column]!))));
  return rows
    .map((row) =>
      row
        .map((cell, column) => padToWidth(cell, widths[column]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
