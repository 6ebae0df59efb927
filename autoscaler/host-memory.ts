/**
 * Level-1 sleepers keep their weights in pinned host RAM; many of them on one
 * machine can exhaust it. Past the budget, the longest-asleep level-1 sleepers
 * are demoted to level 2 until the rest fit.
 */
export interface LevelOneSleeper {
  model: string;
  bytes: number;
  /** When it fell asleep (epoch ms). */
  since: number;
}

export function demotionsForBudget(sleepers: LevelOneSleeper[], budget: number): string[] {
  let used = sleepers.reduce((sum, s) => sum + s.bytes, 0);
  const demote: string[] = [];
  for (const sleeper of [...sleepers].sort((a, b) => a.since - b.since)) {
    if (used <= budget) break;
    if (sleeper.bytes === 0) continue;
    demote.push(sleeper.model);
    used -= sleeper.bytes;
  }
  return demote;
}
