/**
 * `stop` strings as vLLM applies them to a choice's output: once the text holds one (after
 * `min_tokens` tokens), generation ends with `finish_reason: "stop"`, `stop_reason` the string
 * found, and the text cut before it (after it with `include_stop_str_in_output`). The token that
 * completed the string still counts as generated.
 */
import type { PlannedOutput } from "./text.ts";

export interface StopRule {
  strings: readonly string[];
  minTokens: number;
  includeInOutput: boolean;
}

export interface StoppedOutput extends PlannedOutput {
  /** The stop string that ended the output, else null (vLLM's `stop_reason`). */
  stopReason: string | null;
}

/** The plan cut at its first stop string; untouched when none occurs. */
export function cutAtStop(plan: PlannedOutput, rule: StopRule): StoppedOutput {
  if (rule.strings.length === 0) return { ...plan, stopReason: null };
  let text = "";
  for (let i = 0; i < plan.tokens.length; i++) {
    const before = text.length;
    text += plan.tokens[i]!;
    if (i + 1 <= rule.minTokens) continue;
    const found = earliestStop(text, before, rule.strings);
    if (!found) continue;
    const end = rule.includeInOutput ? found.at + found.stop.length : found.at;
    return { tokens: trimTo(plan.tokens.slice(0, i + 1), end), finishReason: "stop", stopReason: found.stop };
  }
  return { ...plan, stopReason: null };
}

/** The first stop string that ends in the new text (from `newFrom` on), by where it starts. */
function earliestStop(text: string, newFrom: number, strings: readonly string[]) {
  let found: { at: number; stop: string } | undefined;
  for (const stop of strings) {
    if (stop === "") continue;
    const at = text.indexOf(stop, Math.max(0, newFrom - stop.length + 1));
    if (at >= 0 && (!found || at < found.at)) found = { at, stop };
  }
  return found;
}

/** The tokens with their text cut at `length` characters; a token past it keeps empty text. */
function trimTo(tokens: string[], length: number): string[] {
  let start = 0;
  return tokens.map((token) => {
    const kept = token.slice(0, Math.max(0, length - start));
    start += token.length;
    return kept;
  });
}

/** A request's `stop` (a string, a list of strings, or absent) as a list. */
export function stopStrings(stop: unknown): string[] {
  if (typeof stop === "string") return [stop];
  if (Array.isArray(stop)) return stop.filter((item): item is string => typeof item === "string");
  return [];
}
