import type { JsonPatch } from "./json-patch.ts";

/** What a webhook decides about one request: allow (maybe with a patch and warnings) or deny. */
export interface Verdict {
  allowed: boolean;
  /** For a denial: what a person reads in kubectl's error. */
  message?: string;
  /** For a denial: the HTTP status the apiserver reports (403 policy, 422 invalid). */
  code?: number;
  /** For a denial: the machine-readable reason (Forbidden, Invalid). */
  reason?: string;
  warnings?: string[];
  patch?: JsonPatch;
}

export const allow = (extra: Pick<Verdict, "warnings" | "patch"> = {}): Verdict => ({
  allowed: true,
  ...(extra.warnings?.length ? { warnings: extra.warnings } : {}),
  ...(extra.patch?.length ? { patch: extra.patch } : {}),
});

/** A denial by policy (slot residency, replicas, removal): 403 Forbidden. */
export const forbid = (message: string): Verdict => ({
  allowed: false,
  message,
  code: 403,
  reason: "Forbidden",
});

/** A denial of invalid settings: 422 Invalid, like the apiserver's own schema errors. */
export const invalid = (message: string): Verdict => ({
  allowed: false,
  message,
  code: 422,
  reason: "Invalid",
});

/** The verdict name used in metrics and logs. */
export function verdictLabel(verdict: Verdict): "allowed" | "patched" | "denied" {
  if (!verdict.allowed) return "denied";
  return verdict.patch && verdict.patch.length > 0 ? "patched" : "allowed";
}
