/**
 * vLLM's `system_fingerprint` (its default `--fingerprint-mode full`): `vllm-<version>-<hash8>`,
 * the hash of the engine's configuration, so it changes when the model or its settings do. It
 * is made once per engine: every non-streaming answer and a stream's last chunk carry it.
 */
import type { SimOptions } from "./options.ts";
import { hashString } from "./random.ts";
import { simVersion } from "./sim-version.ts";

const made = new WeakMap<SimOptions, string>();

export function systemFingerprint(options: SimOptions): string {
  let fingerprint = made.get(options);
  if (fingerprint === undefined) {
    const config = [options.model, options.maxModelLen, options.seed, options.maxNumSeqs].join("|");
    fingerprint = `vllm-${simVersion}-${hashString(config).toString(16).padStart(8, "0")}`;
    made.set(options, fingerprint);
  }
  return fingerprint;
}
