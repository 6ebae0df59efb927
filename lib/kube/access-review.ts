import { clip } from "../clip.ts";
import type { KubeClient } from "./client.ts";
import { ReviewCache, type ReviewCacheOptions } from "./review-cache.ts";
import { ReviewSender } from "./review-request.ts";

export const subjectAccessReviewsPath = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/** Who asks: a TokenReview's user. */
export interface Subject {
  username: string;
  groups?: string[];
}

/** What they ask to do: a verb on one object, as RBAC rules name it. */
export interface ResourceAction {
  group: string;
  resource: string;
  verb: string;
  namespace: string;
  name: string;
}

/** Whether the subject may, or why not: 403 not allowed, 503 cannot tell now. */
export type AccessCheck = { ok: true } | { ok: false; status: 403 | 503; message: string };

/**
 * Asks the API server whether a user may do something, as the cluster's RBAC (or whatever
 * authorizer it runs) decides: a SubjectAccessReview (the asker needs `create` on
 * subjectaccessreviews.authorization.k8s.io). A verb need not be one of the API's own: RBAC rules
 * grant any verb, so a permission to act on an object in a way only Snooze knows (`prewarm` a
 * Model) is a Role like any other. Answers are cached (review-cache.ts); a review the API server
 * could not answer is not cached, and it refuses (503), never lets through.
 */
export class AccessReviewer {
  private readonly cache: ReviewCache<AccessCheck>;
  private readonly sender: ReviewSender;

  constructor(client: KubeClient, options: ReviewCacheOptions = {}) {
    this.cache = new ReviewCache(options);
    this.sender = new ReviewSender(client, options);
  }

  check(subject: Subject, action: ResourceAction): Promise<AccessCheck> {
    const question = JSON.stringify([subject.username, subject.groups ?? [], action]);
    return this.cache.answer(
      question,
      () => this.review(subject, action),
      (check) => check.ok || check.status !== 503,
    );
  }

  private async review(subject: Subject, action: ResourceAction): Promise<AccessCheck> {
    let status:
      | { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string }
      | undefined;
    try {
      const answer = await this.sender.send<{ status?: typeof status }>(subjectAccessReviewsPath, {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: { user: subject.username, groups: subject.groups ?? [], resourceAttributes: action },
      });
      status = answer?.status;
    } catch (error) {
      return {
        ok: false,
        status: 503,
        message: `cannot ask the API server whether ${subject.username} may ${action.verb} now: ${(error as Error).message}`,
      };
    }
    if (status?.allowed === true) return { ok: true };
    const { group, resource, verb, namespace, name } = action;
    // The authorizer's words, by their start (a webhook authorizer may say a lot).
    const reason = status?.reason || status?.evaluationError;
    const why = reason ? clip(String(reason)) : undefined;
    return {
      ok: false,
      status: 403,
      message: `${subject.username} may not ${verb} ${resource}.${group} ${namespace}/${name}${why ? ` (${why})` : ""}`,
    };
  }
}
