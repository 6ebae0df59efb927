import { parseAllowedOrigins } from "../activator/cors.ts";
import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";

/** `--allowed-origins`, as vLLM's server takes it: which browser pages may call `/v1/` (activator/cors.ts). */
export const corsFlags: Record<"allowed-origins", Flag> = {
  "allowed-origins": {
    type: "string",
    description:
      "origins whose browser pages may call /v1/, comma-separated, * for any (default: none, preflights get a 403 saying so)",
    placeholder: "origins",
  },
};

/** The origins `--allowed-origins` allows, or a usage error naming the one that is not an origin. */
export function allowedOriginsValue(values: FlagValues): string[] {
  const text = values["allowed-origins"];
  if (typeof text !== "string") return [];
  const parsed = parseAllowedOrigins(text);
  if (!parsed.ok) throw new UsageError(`--allowed-origins: ${parsed.message}`);
  return parsed.origins;
}
