import { keepNewest } from "../../lib/keep-newest.ts";

/**
 * vLLM's in-memory response store, on with `VLLM_ENABLE_RESPONSES_API_STORE=1` (off by default: it
 * never forgets, vLLM warns of the leak). Each response kept by id as its last state; a background
 * one also with the way to cancel its generation. Unlike vLLM's the simulator's keeps the most
 * recent `limit`, so a long test run cannot grow it without end.
 */
export class ResponseStore {
  private readonly responses = new Map<string, StoredResponse>();
  private readonly limit: number;

  constructor(limit = 10_000) {
    this.limit = limit;
  }

  get(id: string): StoredResponse | undefined {
    return this.responses.get(id);
  }

  put(id: string, entry: StoredResponse): void {
    keepNewest(this.responses, id, entry, this.limit);
  }
}

export interface StoredResponse {
  /** The response object as a retrieve answers it (its `status` moves while a background one runs). */
  response: Record<string, unknown>;
  /** A background generation still running: stops it. */
  cancel?: () => void;
}
