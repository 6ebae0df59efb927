import type { TraceRequest } from "./trace.ts";

/**
 * A reproducer rather than a benchmark: one member is saturated (more demand
 * than its concurrency serves, so its hold queue never empties) while one
 * request for another member waits. The arbiter promises that no member is
 * passed over for longer than maxWait; whether it keeps that promise depends
 * on what the saturated resident's `heldSince` means (see simulator.ts).
 */
export interface SaturationOptions {
  resident: string;
  waiting: string;
  durationMs: number;
  /** One request for the resident this often (500 tokens in, 400 out). */
  residentEveryMs: number;
  /** When the one request for the other member arrives. */
  waitingAt: number;
}

export const saturationDefaults: SaturationOptions = {
  resident: "coder-7b",
  waiting: "chat-14b",
  durationMs: 8 * 60_000,
  residentEveryMs: 500,
  waitingAt: 60_000,
};

export function saturationRequests(options: SaturationOptions = saturationDefaults): TraceRequest[] {
  const requests: TraceRequest[] = [];
  for (let at = 0; at < options.durationMs; at += options.residentEveryMs)
    requests.push({ id: 0, model: options.resident, at, inputTokens: 500, outputTokens: 400 });
  requests.push({
    id: 0,
    model: options.waiting,
    at: options.waitingAt,
    inputTokens: 500,
    outputTokens: 100,
  });
  requests.sort((a, b) => a.at - b.at);
  return requests.map((request, id) => ({ ...request, id }));
}
