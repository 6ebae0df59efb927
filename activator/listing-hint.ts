import { isAsleep, type Tier } from "../lib/replica-event.ts";

/**
 * Which models a `GET /v1/models` (or `GET /v1/models/<id>`) hints at, as a pure function of what
 * the activator knows and `now`. A chat UI lists the models when it opens, shortly before its user
 * sends a request to one of them, usually the one they used last; a client that retrieves one model
 * by name is about to use that one. Either is a weak hint, so it is acted on sparingly:
 *
 * - only for a model with a `prewarmBudget` (the hint is a short prewarm within it, and a hint that
 *   finds the budget spent does nothing) that is asleep or cold (an awake one needs nothing);
 * - a listing names no model, so it hints only at models used within `recentMs`, the most
 *   recently used first, at most `perListing` of them;
 * - each model at most once per `intervalMs`, and at most `perInterval` models in all per
 *   `intervalMs`: a client polling the list every second wakes no more than that, and a listing
 *   never wakes everything.
 */
export const hintRecentMs = 60 * 60_000;
export const hintIntervalMs = 10 * 60_000;
export const hintsPerListing = 2;
export const hintsPerInterval = 4;
/** How long a hinted model is kept awake for the request the hint announces. */
export const hintForMs = 2 * 60_000;

export interface HintCandidate {
  id: string;
  tier: Tier;
  /** When the model last had a request in flight or held here (epoch ms). */
  lastActive?: number;
  prewarmBudget: number;
}

export interface HintInput {
  now: number;
  models: readonly HintCandidate[];
  /** When each model was last hinted at (epoch ms). */
  hinted: ReadonlyMap<string, number>;
  /** The model a `GET /v1/models/<id>` named; absent for a listing. */
  named?: string;
}

export function listingHints(input: HintInput): string[] {
  const { now, hinted } = input;
  const recent = (at: number | undefined) => at !== undefined && now - at < hintIntervalMs;
  const room = hintsPerInterval - [...hinted.values()].filter(recent).length;
  if (room <= 0) return [];
  const eligible = (m: HintCandidate) =>
    m.prewarmBudget > 0 && (m.tier === "cold" || isAsleep(m.tier)) && !recent(hinted.get(m.id));
  if (input.named !== undefined) {
    const model = input.models.find((m) => m.id === input.named);
    return model && eligible(model) ? [model.id] : [];
  }
  return input.models
    .filter((m) => eligible(m) && m.lastActive !== undefined && now - m.lastActive < hintRecentMs)
    .sort((a, b) => b.lastActive! - a.lastActive! || a.id.localeCompare(b.id))
    .slice(0, Math.min(hintsPerListing, room))
    .map((m) => m.id);
}

/** The hints an activator gave, for the rate limits: `take` decides and records them. */
export class ListingHints {
  private readonly hinted = new Map<string, number>();

  take(now: number, models: readonly HintCandidate[], named?: string): string[] {
    for (const [id, at] of this.hinted) if (now - at >= hintIntervalMs) this.hinted.delete(id);
    const ids = listingHints({ now, models, hinted: this.hinted, named });
    for (const id of ids) this.hinted.set(id, now);
    return ids;
  }

  /**
   * A hint the control plane did not act on (a person's sleep or stop holds the model, or its
   * budget is spent) woke nothing: it does not count against the limits.
   */
  giveBack(id: string, at: number): void {
    if (this.hinted.get(id) === at) this.hinted.delete(id);
  }
}
