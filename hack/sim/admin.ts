/**
 * The simulator's own endpoints, under `/sim/` because vLLM has nothing like
 * them: inject faults at run time, read the engine's state, crash on demand.
 */
import type { SimEngine } from "./engine.ts";
import { applyFaultUpdate } from "./faults.ts";
import { httpException } from "./vllm-error.ts";

export interface AdminAnswer {
  status: number;
  json?: unknown;
}

/** `GET /sim/faults`. */
export function getFaults(engine: SimEngine): AdminAnswer {
  return { status: 200, json: engine.faults };
}

/** `POST /sim/faults {"wakeFail": 1, ...}`: merges, answers the faults now in force. */
export function postFaults(engine: SimEngine, rawBody: string): AdminAnswer {
  let update: unknown;
  try {
    update = JSON.parse(rawBody || "{}");
  } catch (error) {
    throw httpException(400, `JSON decode error: ${(error as Error).message}`);
  }
  const problem = applyFaultUpdate(engine.faults, update);
  if (problem) throw httpException(400, problem);
  engine.log.warn("faults changed", { faults: { ...engine.faults } });
  return { status: 200, json: engine.faults };
}

/** `GET /sim/state`. */
export function getState(engine: SimEngine): AdminAnswer {
  return { status: 200, json: engine.state() };
}

/** `POST /sim/crash`: the engine dies now, as if its process were killed. */
export function postCrash(engine: SimEngine): AdminAnswer {
  // After the answer is written: the death closes every connection.
  setImmediate(() => engine.die("crash requested on /sim/crash"));
  return { status: 200, json: { crashing: true } };
}
