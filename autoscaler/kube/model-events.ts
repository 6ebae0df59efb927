import { formatDuration } from "../../lib/duration.ts";
import type { News } from "../tier-events.ts";

/** A Kubernetes Event to record on one Model (its controller key, `namespace/name`). */
export interface ModelEvent {
  model: string;
  type: "Normal" | "Warning";
  /** UpperCamelCase, as Kubernetes reasons are. */
  reason: "Started" | "Woke" | "Slept" | "Stopped" | "Failed" | "Swapped";
  /** What Snooze did (events.k8s.io/v1 `action`). */
  action: "Start" | "Wake" | "Sleep" | "Stop" | "Swap";
  note: string;
}

const took = (ms: unknown) => (typeof ms === "number" ? ` in ${formatDuration(ms)}` : "");

/**
 * **Pure**: the Kubernetes Events that mirror one piece of news (a CloudEvent of tier-events.ts) on
 * the Models it is about, so `kubectl describe model` tells the same story as the event sink. A
 * swap is told on both members: the target took the slot, the incumbent gave it up.
 */
export function modelEventsFor(news: News): ModelEvent[] {
  const d = news.data;
  const replica = `Replica ${String(d.replica)}`;
  const one = (event: Omit<ModelEvent, "model">): ModelEvent[] =>
    news.models[0] === undefined ? [] : [{ model: news.models[0], ...event }];
  switch (news.type) {
    case "dev.snooze.replica.started":
      return one({
        type: "Normal",
        reason: "Started",
        action: "Start",
        note: `${replica} started${took(d.durationMs)}`,
      });
    case "dev.snooze.replica.woke":
      return one({
        type: "Normal",
        reason: "Woke",
        action: "Wake",
        note: `${replica} woke${took(d.durationMs)}`,
      });
    case "dev.snooze.replica.slept": {
      const how = d.from === "draining" ? "drained and slept" : `went from ${String(d.from)}`;
      const detail = typeof d.durationMs === "number" ? ` (${how}${took(d.durationMs)})` : "";
      return one({
        type: "Normal",
        reason: "Slept",
        action: "Sleep",
        note: `${replica} slept at level ${String(d.level)}${detail}`,
      });
    }
    case "dev.snooze.replica.stopped": {
      const was =
        typeof d.durationMs === "number"
          ? ` (was ${String(d.from)} for ${formatDuration(d.durationMs)})`
          : "";
      return one({ type: "Normal", reason: "Stopped", action: "Stop", note: `${replica} stopped${was}` });
    }
    case "dev.snooze.activation.failed": {
      const what = d.from === "starting" ? "start" : "wake";
      const after = typeof d.durationMs === "number" ? ` after ${formatDuration(d.durationMs)}` : "";
      return one({
        type: "Warning",
        reason: "Failed",
        action: what === "start" ? "Start" : "Wake",
        note: `${replica} failed to ${what}${after}: ${String(d.reason)}`,
      });
    }
    case "dev.snooze.slot.swapped": {
      const [to, from] = news.models;
      const why = ` (${String(d.reason)})`;
      const slot = String(d.slot);
      return [
        ...(to
          ? [
              {
                model: to,
                type: "Normal",
                reason: "Swapped",
                action: "Swap",
                note: `Took slot ${slot} from ${String(d.from)}${took(d.durationMs)}${why}`,
              } as const,
            ]
          : []),
        ...(from
          ? [
              {
                model: from,
                type: "Normal",
                reason: "Swapped",
                action: "Swap",
                note: `Gave slot ${slot} to ${String(d.to)}${took(d.durationMs)}${why}`,
              } as const,
            ]
          : []),
      ];
    }
    default:
      return [];
  }
}
