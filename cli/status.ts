import type { AdminModelView } from "../activator/admin.ts";
import { formatDuration } from "../lib/duration.ts";
import { adminHeaders, adminTokenFlags, adminTokenFrom } from "./admin-token.ts";
import type { Command } from "./command.ts";

/** `snooze status`: what a running Snooze holds, as a table (or JSON). */
export const statusCommand: Command = {
  name: "status",
  summary: "Show each model's tier, held and in-flight requests, and last wake and start times.",
  flags: {
    url: {
      type: "string",
      default: "http://127.0.0.1:8080",
      description: "the activator's address",
      placeholder: "url",
    },
    json: { type: "boolean", description: "print the admin API's JSON instead of a table" },
    ...adminTokenFlags,
  },
  async run(values) {
    const url = `${String(values.url).replace(/\/$/, "")}/snooze/v1/models`;
    const headers = adminHeaders(adminTokenFrom(values));
    let response: Response;
    try {
      response = await fetch(url, { headers, signal: AbortSignal.timeout(5_000) });
    } catch (error) {
      console.error(
        `snooze status: cannot reach ${url}: ${(error as Error).cause ?? (error as Error).message}`,
      );
      return 1;
    }
    if (!response.ok) {
      console.error(`snooze status: ${url} answered ${response.status}: ${await response.text()}`);
      return 1;
    }
    const { models } = (await response.json()) as { models: AdminModelView[] };
    if (values.json) {
      console.log(JSON.stringify(models, null, 2));
      return 0;
    }
    console.log(formatTable(models, Date.now()));
    return 0;
  },
};

export function formatTable(models: AdminModelView[], now: number): string {
  const ms = (value?: number) => (value === undefined ? "-" : formatDuration(value));
  const rows = [
    ["MODEL", "TIER", "FOR", "HELD", "IN-FLIGHT", "LAST WAKE", "LAST START", "SLOT", "LAST ERROR"],
    ...models.map((m) => [
      m.id,
      m.tier,
      formatDuration(Math.max(0, now - Date.parse(m.since))),
      String(m.held),
      String(m.inFlight),
      ms(m.lastWakeMs),
      ms(m.lastStartMs),
      m.slot ?? "-",
      m.lastError ?? "",
    ]),
  ];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
