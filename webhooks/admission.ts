import { z } from "zod";
import { moreJsonValuesThan } from "../lib/json-values.ts";
import type { Verdict } from "./verdict.ts";

/**
 * The AdmissionReview (admission.k8s.io/v1) the apiserver sends, parsed strictly enough that garbage
 * never reaches a decision: anything that does not have this shape is answered with HTTP 400, never
 * with a verdict. Unknown fields are tolerated (newer apiservers add some); `object` and `oldObject`
 * are kept as plain JSON objects and read by path where a rule needs them.
 */

const jsonObject = z.custom<Record<string, unknown>>(
  (value) => typeof value === "object" && value !== null && !Array.isArray(value),
  { message: "expected a JSON object" },
);

const groupVersionKind = z.object({ group: z.string(), version: z.string().min(1), kind: z.string().min(1) });
const groupVersionResource = z.object({
  group: z.string(),
  version: z.string().min(1),
  resource: z.string().min(1),
});

const userInfo = z.object({
  username: z.string().optional(),
  uid: z.string().optional(),
  groups: z.array(z.string()).optional(),
  extra: z.record(z.string(), z.array(z.string())).optional(),
});

const admissionRequest = z
  .object({
    uid: z
      .string()
      .regex(/^[\x21-\x7e]{1,128}$/, { message: "expected a UID (1 to 128 printable characters)" }),
    kind: groupVersionKind,
    resource: groupVersionResource,
    subResource: z.string().optional(),
    requestKind: groupVersionKind.optional(),
    requestResource: groupVersionResource.optional(),
    requestSubResource: z.string().optional(),
    name: z.string().optional(),
    namespace: z.string().optional(),
    operation: z.enum(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
    userInfo,
    object: jsonObject.nullable().optional(),
    oldObject: jsonObject.nullable().optional(),
    dryRun: z.boolean().optional(),
    options: z.unknown().optional(),
  })
  .superRefine((request, context) => {
    // What each operation must carry (admission.k8s.io/v1): a new object to create or update, the
    // old one to update or delete. A review without them cannot be judged.
    if ((request.operation === "CREATE" || request.operation === "UPDATE") && !request.object) {
      context.addIssue({ code: "custom", path: ["object"], message: `${request.operation} needs an object` });
    }
    if ((request.operation === "UPDATE" || request.operation === "DELETE") && !request.oldObject) {
      context.addIssue({
        code: "custom",
        path: ["oldObject"],
        message: `${request.operation} needs an oldObject`,
      });
    }
  });

const admissionReview = z.object({
  apiVersion: z.literal("admission.k8s.io/v1"),
  kind: z.literal("AdmissionReview"),
  request: admissionRequest,
});

export type AdmissionRequest = z.output<typeof admissionRequest>;
export type UserInfo = z.output<typeof userInfo>;

export type ParsedReview = { ok: true; request: AdmissionRequest } | { ok: false; problem: string };

/**
 * JSON values a review may hold, its objects and their items together. Far above what Kubernetes
 * objects hold (a Deployment with hundreds of containers' settings holds some thousands), and low
 * enough that parsing one takes about 14 MB at most: 6 MiB of `[{},{},…]` (within the body limit)
 * took 360 MB, past the 256 MiB the webhook pod may use, and three at once killed the process.
 */
export const defaultMaxJsonValues = 200_000;

/** Parses the body of a webhook call; `problem` says what is wrong, for the 400 answer. */
export function parseAdmissionReview(body: string, maxValues = defaultMaxJsonValues): ParsedReview {
  if (moreJsonValuesThan(body, maxValues))
    return {
      ok: false,
      problem: `the review holds more than ${maxValues} JSON values (objects, arrays and their items), more than any Kubernetes object needs; it is not parsed`,
    };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    return { ok: false, problem: `the body is not JSON: ${(error as Error).message}` };
  }
  const parsed = admissionReview.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.map(String).join(".") || "(body)"}: ${issue.message}`);
    return { ok: false, problem: `not an admission.k8s.io/v1 AdmissionReview: ${problems.join("; ")}` };
  }
  return { ok: true, request: parsed.data.request };
}

/** The AdmissionReview answer for `uid`: the verdict, a base64 JSONPatch when there is one, warnings. */
export function admissionResponse(uid: string, verdict: Verdict): Record<string, unknown> {
  const response: Record<string, unknown> = { uid, allowed: verdict.allowed };
  if (!verdict.allowed) {
    response.status = {
      code: verdict.code ?? 403,
      reason: verdict.reason ?? "Forbidden",
      message: verdict.message ?? "denied",
    };
  }
  if (verdict.allowed && verdict.patch && verdict.patch.length > 0) {
    response.patchType = "JSONPatch";
    response.patch = Buffer.from(JSON.stringify(verdict.patch)).toString("base64");
  }
  if (verdict.warnings && verdict.warnings.length > 0) response.warnings = verdict.warnings;
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response };
}
