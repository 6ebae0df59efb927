import type { AdminModelView, EngineLog } from "../activator/admin.ts";
import { UsageError } from "../lib/cli-flags.ts";
import { clip, clipMiddle } from "../lib/clip.ts";
import { formatDuration } from "../lib/duration.ts";
import { formatLogsAfter } from "../lib/logs-after.ts";
import { printable, shown } from "../lib/printable.ts";
import { isAsleep, isResident, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";
import type { SlotStatus } from "../lib/slot-status.ts";
import { actionAnswer, engineLogs, modelList, tierEvent } from "./answer-shapes.ts";
import {
  AdminClient,
  adminUrl,
  checked,
  clientFlags,
  modelArgument,
  notSnooze,
  runClient,
} from "./client.ts";
import type { Command } from "./command.ts";
import { durationValue } from "./flags.ts";
import { outputTaken } from "./output-taken.ts";

/** `GET /snooze/v1/models`: every model, and the slots (absent from a Snooze older than slots). */
const listModels = (client: AdminClient) =>
  client.json<{ models: AdminModelView[]; slots?: SlotStatus[] }>("/snooze/v1/models", modelList);

/** The model's id for a name (an id or an alias), from the admin API's model list. */
async function findModel(client: AdminClient, name: string): Promise<AdminModelView> {
  const { models } = await listModels(client);
  // In either Unicode form (NFD from a macOS terminal against NFC in the file), as the server reads names.
  const nfc = name.normalize("NFC");
  const named = (other: string) => other === name || other.normalize("NFC") === nfc;
  const model = models.find((m) => named(m.id) || m.aliases.some(named));
  if (!model) {
    const known = printable(clip(models.map((m) => m.id).join(", "), 1_000), true);
    // The name meant, among the ids and aliases (an alias is not in the list): `snooze wake QWEN3`
    // or `qwen-3` for an alias `qwen3` only listed the ids (found by an outside tester).
    const { closestKey } = await import("../lib/settings/suggest.ts");
    const near = closestKey(
      name,
      models.flatMap((m) => [m.id, ...m.aliases]),
    );
    throw new UsageError(
      `no model named ${shown(name)}${near === undefined ? "" : `; did you mean ${shown(near)}?`}; this Snooze serves ${known || "no models"}`,
    );
  }
  return model;
}

const actionPath = (id: string, verb: string) => `/snooze/v1/models/${encodeURIComponent(id)}/${verb}`;

/** `snooze wake MODEL`: asks for a wake (or start) and, unless --no-wait, follows it until ready. */
export const wakeCommand: Command = {
  name: "wake",
  positionals: "<model>",
  flags: {
    ...clientFlags,
    "no-wait": { type: "boolean", description: "ask for the wake and return at once" },
    timeout: {
      type: "string",
      default: "10m",
      description: "give up waiting after this long",
      placeholder: "duration",
    },
  },
  run: (values, positionals) =>
    runClient("wake", async () => {
      const name = modelArgument("wake", positionals);
      const timeoutMs = durationValue(values, "timeout", { positive: true });
      const client = new AdminClient(values);
      const model = await findModel(client, name);
      const id = model.id;
      if (values["no-wait"]) {
        const answer = await client.action<{ tier: string }>(
          actionPath(id, "wake"),
          actionAnswer,
          undefined,
          true,
        );
        console.log(`${shown(id)}: wake requested (now ${shown(answer.tier)})`);
        const backoff = backoffNote(model);
        if (backoff) console.log(backoff);
        return 0;
      }
      return follow(client, model, timeoutMs);
    }),
};

/** The replica events from now on: `snooze wake` follows its model's in them. */
const eventsPath = "/snooze/v1/events/stream?after=latest";

/**
 * Opens the event stream first (so no tier change is missed), asks for the wake, then prints each
 * tier change of the model until one of its replicas is ready or its activation failed.
 */
async function follow(client: AdminClient, model: AdminModelView, timeoutMs: number): Promise<number> {
  const { id, tier: from } = model;
  // The model's id (and the server's other words) as printed: safe on a terminal.
  const name = shown(id);
  const started = performance.now();
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const tty = process.stdout.isTTY === true;
  // Only changes are shown: a swap's announcement repeats the tier the model already has.
  let tier = from;
  let outcome: number | undefined;
  let ticker: NodeJS.Timeout | undefined;
  const elapsed = () => formatDuration(performance.now() - started);
  const line = (text: string) => {
    if (tty) process.stdout.write("\r\x1b[2K");
    console.log(text);
  };
  // Failures go where errors go (the exit code is 1 with them), after clearing the progress line.
  const failure = (text: string) => {
    if (tty) process.stdout.write("\r\x1b[2K");
    console.error(text);
  };
  const finish = (code: number, text: string) => {
    outcome = code;
    (code === 0 ? line : failure)(text);
    return true;
  };
  const onEvent = (type: string, data: unknown): boolean => {
    // The list of models changed (a reload): one that is no longer in it ends the wake.
    if (type === "models") void endedByRemoval();
    if (type !== "tier") return false;
    const event = checked<ReplicaEvent>(String(adminUrl(client.url, eventsPath)), data, tierEvent);
    if (event.model !== id) return false;
    if (event.error !== undefined && event.tier !== "ready")
      return finish(1, `${name}: the activation failed after ${elapsed()}: ${message(event.error)}`);
    if (event.tier === "ready")
      return finish(0, `${name}: ready after ${elapsed()} (${shown(event.replica)})`);
    // A replica gone with no failure: a person's stop or sleep may have ended the wake. The model's
    // own tier says (another replica may still be waking). A sleep asked during a warm-up no request
    // waits for skips it: the replica goes from starting or waking to sleep, never ready.
    if (event.tier === "cold" || (isAsleep(event.tier) && isResident(tier))) void endedByPark();
    else if (event.tier !== tier) {
      tier = event.tier;
      const estimate = event.estimateMs !== undefined ? `, usually ~${formatDuration(event.estimateMs)}` : "";
      line(`${name}: ${shown(tier)} (${shown(event.replica)}${estimate})`);
    }
    return false;
  };
  // A reload that removed or renamed the model: its engine stopped (a cold event) and no wake is
  // coming. Found by a probe: read as "not parked", the wake waited silently until its --timeout.
  const removed = (list: { models: AdminModelView[] } | undefined) => {
    if (outcome !== undefined || list === undefined || list.models.some((m) => m.id === id)) return false;
    finish(
      1,
      `${name}: the wake ended after ${elapsed()}: the model is no longer in Snooze's settings (a reload removed or renamed it)`,
    );
    abort.abort();
    return true;
  };
  const endedByRemoval = async () => removed(await listModels(client).catch(() => undefined));
  const endedByPark = async () => {
    const list = await listModels(client).catch(() => undefined);
    if (removed(list)) return;
    const now = list?.models.find((m) => m.id === id);
    const parked = now !== undefined && (now.tier === "cold" || isAsleep(now.tier));
    if (outcome !== undefined || !parked || now.retryAt !== undefined || now.held > 0) return;
    // A swap's announcement says `cold` too while the wake waits for the slot, counted there apart
    // from held requests: the wake goes on. A person's stop or sleep takes it out of the waiting.
    const waiting = list?.slots?.find((s) => s.name === now.slot)?.waiting;
    if (waiting?.some((w) => w.model === id && w.wake === true)) return;
    const again = now.tier === "cold" ? "cold again" : `asleep (${shown(now.tier)})`;
    finish(
      1,
      `${name}: the wake ended after ${elapsed()}: the model is ${again} (a \`snooze stop\` or \`sleep\`?)`,
    );
    abort.abort();
  };
  let hello = false;
  let opened!: () => void;
  const open = new Promise<void>((resolve) => {
    opened = resolve;
  });
  const stream = client
    .events(
      eventsPath,
      (type, data) => {
        if (type === "hello") {
          hello = true;
          opened();
          return false;
        }
        return onEvent(type, data);
      },
      abort.signal,
    )
    .finally(opened);
  // Awaited below; until then, a stream that fails (an event not as Snooze sends it) is no unhandled rejection.
  stream.catch(() => {});
  const release = onInterrupt("wake", name);
  try {
    await open;
    if (!hello) {
      // The stream failed before it began (refused, unreachable, not Snooze's): say why, wake nothing.
      await stream;
      throw notSnooze(
        String(adminUrl(client.url, eventsPath)),
        "its event stream ended before its first event",
      );
    }
    if (from !== "ready") line(`${name}: ${shown(from)} → ready`);
    // A back-off after failures is said at once: the wait is not silent.
    const backoff = backoffNote(model);
    if (backoff) line(backoff);
    const answer = await client.action<{ tier: string }>(
      actionPath(id, "wake"),
      actionAnswer,
      abort.signal,
      true,
    );
    if (answer.tier === "ready" && outcome === undefined) {
      abort.abort();
      console.log(`${name}: ready`);
      return 0;
    }
    if (tty)
      ticker = setInterval(() => process.stdout.write(`\r\x1b[2K${name}: ${shown(tier)} ${elapsed()}`), 200);
    await stream;
    if (outcome !== undefined) return outcome;
    if (abort.signal.aborted) {
      failure(
        `${name}: not ready after ${formatDuration(timeoutMs)} (still ${shown(tier)})${await slotNote(client, id)}; see \`snooze status\``,
      );
      return 1;
    }
    failure(`${name}: the event stream ended before the model was ready; see \`snooze status\``);
    return 1;
  } catch (error) {
    if (abort.signal.aborted && outcome === undefined) {
      failure(`${name}: not ready after ${formatDuration(timeoutMs)}${await slotNote(client, id)}`);
      return 1;
    }
    if (outcome !== undefined) return outcome;
    throw error;
  } finally {
    release();
    clearTimeout(timer);
    clearInterval(ticker);
    abort.abort();
    await stream.catch(() => {});
  }
}

/**
 * A wake that timed out while another member of the model's slot held the slot: that it waited for
 * its slot, in the words a request held for the model is told (the admin view's `slotWait`: who
 * holds it, and until when). Empty when it did not, or the server cannot say.
 */
async function slotNote(client: AdminClient, id: string): Promise<string> {
  const list = await listModels(client).catch(() => undefined);
  const reason = list?.models.find((m) => m.id === id)?.slotWait;
  return reason ? `: it waited for its slot, as ${message(reason)}` : "";
}

/** Ctrl-C ends the wait, not the action: Snooze goes on with it, and the person is told so. */
function onInterrupt(verb: string, id: string): () => void {
  const interrupted = () => {
    process.stderr.write(
      `\nsnooze ${verb}: no longer waiting; the ${verb} of ${id} goes on in Snooze (\`snooze status\` shows it)\n`,
    );
    process.exit(130);
  };
  process.once("SIGINT", interrupted);
  return () => process.off("SIGINT", interrupted);
}

/** The line that says a wake waits out a back-off first; empty when there is none. */
function backoffNote(model: AdminModelView): string {
  const retryIn = model.retryAt ? Date.parse(model.retryAt) - Date.now() : 0;
  if (retryIn <= 0) return "";
  const why = model.lastError ? ` (${message(model.lastError)})` : "";
  return `${shown(model.id)}: waiting out a back-off after a failed activation${why}; the next try in ${formatDuration(retryIn)}`;
}

function parkCommand(verb: "sleep" | "stop"): Command {
  return {
    name: verb,
    positionals: "<model>",
    flags: clientFlags,
    run: (values, positionals) =>
      runClient(verb, async () => {
        const name = modelArgument(verb, positionals);
        const client = new AdminClient(values);
        const model = await findModel(client, name);
        const { id } = model;
        const started = performance.now();
        if (process.stdout.isTTY)
          process.stdout.write(`${verb === "sleep" ? "sleeping" : "stopping"} ${shown(id)}…\n`);
        const release = onInterrupt(verb, shown(id));
        // Not silent while it waits: what it waits for, once the answer is not there at once.
        const note = parkNote(verb, model);
        const noted = note ? setTimeout(() => console.log(note), parkNoteAfterMs) : undefined;
        try {
          // The activator answers once the drain and the sleep (or stop) are done.
          const answer = await client.action<{ tier: string }>(actionPath(id, verb), actionAnswer);
          console.log(
            `${shown(id)}: ${shown(answer.tier)} after ${formatDuration(performance.now() - started)}`,
          );
          return 0;
        } finally {
          clearTimeout(noted);
          release();
        }
      }),
  };
}

/** How long a sleep or stop runs before the command says what it waits for. */
const parkNoteAfterMs = 1_000;

/**
 * What a person's sleep or stop waits for before it is done, by what the model was doing when it
 * was asked: the requests held for it (served first), a start's load or a wake call (an engine
 * sleeps only loaded and awake; its warm-up is skipped), requests in flight (at most its
 * drainTimeout); empty when nothing is waited for but the engine's own sleep or stop.
 */
function parkNote(verb: "sleep" | "stop", model: AdminModelView): string {
  const name = shown(model.id);
  const then = verb === "sleep" ? "then it sleeps" : "then it stops";
  const requests = (n: number) => `${n} request${n === 1 ? "" : "s"}`;
  if (model.held > 0)
    return `${name}: ${requests(model.held)} held for it ${model.held === 1 ? "is" : "are"} served first, ${then}`;
  const tier: Tier = model.tier;
  if (verb === "sleep" && tier === "starting")
    return `${name}: its engine is still loading; it sleeps once loaded (its warm-up is skipped)`;
  if (verb === "sleep" && tier === "waking")
    return `${name}: its wake call is under way; it sleeps once awake (its warm-up is skipped)`;
  if (model.inFlight > 0)
    return `${name}: waiting for ${requests(model.inFlight)} in flight to finish (at most its drainTimeout), ${then}`;
  return "";
}

export const sleepCommand = parkCommand("sleep");

export const stopCommand = parkCommand("stop");

/** The most lines the logs route returns at once (activator/status-page.ts): more reads as many. */
const maxLogLines = 10_000;

/** `snooze logs MODEL`: the engine's last lines of stdout and stderr; `-f` keeps printing new ones. */
export const logsCommand: Command = {
  name: "logs",
  positionals: "<model>",
  flags: {
    ...clientFlags,
    follow: { type: "boolean", short: "f", description: "keep printing new lines (asks once a second)" },
    lines: {
      type: "string",
      short: "n",
      default: "100",
      description: "how many of the last lines to print first",
      placeholder: "n",
    },
  },
  run: (values, positionals) =>
    runClient("logs", async () => {
      const name = modelArgument("logs", positionals);
      // Decimal digits only, as the server reads `lines` (Number() took "0x10", "1e3" and " 5"),
      // and no more than it reads: past 2^53 a count went out as "1e+22", which it refused.
      const text = String(values.lines);
      const count = /^\d+$/.test(text) ? Math.min(Number(text), maxLogLines) : 0;
      if (count < 1)
        throw new UsageError(`--lines must be a whole number of at least 1, not ${JSON.stringify(text)}`);
      const client = new AdminClient(values);
      const { id } = await findModel(client, name);
      const path = `/snooze/v1/models/${encodeURIComponent(id)}/logs`;
      const seen = new Map<string, number>();
      const onTerminal = process.stdout.isTTY === true;
      let first = true;
      const print = (replicas: EngineLog[]) => {
        // With more than one engine so far, each line says whose it is.
        const several = new Set([...seen.keys(), ...replicas.map((r) => r.replica)]).size > 1;
        for (const log of replicas) {
          const before = seen.get(log.replica) ?? 0;
          const number = log.total - log.lines.length + 1;
          const fresh = log.lines.slice(Math.max(0, before + 1 - number));
          const skipped = number - before - 1;
          // The engine's lines are its output, printed as they are (as `kubectl logs` does) where
          // they go to a file or a program; on a terminal, where they would act, made safe as the
          // server's other words are (found by an outside tester: an engine's escape sequences
          // retitled and cleared the terminal, and an OSC 52 could set its clipboard).
          if (!first && skipped > 0) console.log(`[${shown(log.replica)}] … ${skipped} lines not kept`);
          for (const text of fresh.map(onTerminal ? (line) => printable(line) : (line) => line))
            console.log(several ? `[${shown(log.replica)}] ${text}` : text);
          seen.set(log.replica, log.total);
        }
        first = false;
      };
      const { replicas } = await client.json<{ replicas: EngineLog[] }>(`${path}?lines=${count}`, engineLogs);
      // An engine that printed nothing (one that exited at once, `exit 3`) says so too (found by an
      // outside tester: `snooze logs` printed nothing at all, as if it had not asked).
      if (!values.follow && replicas.every((log) => log.total === 0 && !log.unfinished))
        console.error(
          replicas.length === 0
            ? `snooze logs: ${shown(id)} has no engine output yet`
            : `snooze logs: ${shown(id)} has no engine output yet: ${replicas.map((log) => `${shown(log.replica)} (${log.running ? "running" : "exited"})`).join(", ")} printed nothing`,
        );
      print(replicas);
      // The line a running engine is still writing (found by an outside tester: a progress bar stuck
      // at 40% showed 10%, its update before, and a prompt waited on did not show at all). Not
      // followed: it comes again as a line once it has ended.
      if (!values.follow) {
        const several = replicas.length > 1;
        for (const log of replicas)
          for (const text of (log.unfinished ?? []).map(
            onTerminal ? (line) => printable(line) : (line) => line,
          ))
            console.log(several ? `[${shown(log.replica)}] ${text}` : text);
        return 0;
      }
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        while (!stop.signal.aborted) {
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          // Not asked again before the reader has taken what was printed: the lines the server no
          // longer keeps meanwhile are said as `… N lines not kept`, not held here.
          await outputTaken(stop.signal);
          if (stop.signal.aborted) break;
          const after = formatLogsAfter(seen);
          const query = new URLSearchParams({ after, lines: "500" });
          try {
            const next = await client.json<{ replicas: EngineLog[] }>(`${path}?${query}`, engineLogs, {
              signal: stop.signal,
            });
            print(next.replicas);
          } catch (error) {
            if (stop.signal.aborted) break;
            throw error;
          }
        }
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      return 0;
    }),
};

/** An error the server reports (an activation's failure): kept to its start and end, safe to print. */
const message = (text: string) => printable(clipMiddle(text, 500));
