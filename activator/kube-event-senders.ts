import { AccessReviewer } from "../lib/kube/access-review.ts";
import { group } from "../lib/kube/api-group.ts";
import type { KubeClient } from "../lib/kube/client.ts";
import { audienceClaims } from "../lib/kube/jwt-claims.ts";
import type { ReviewCacheOptions } from "../lib/kube/review-cache.ts";
import { type CallerCheck, TokenReviewer } from "../lib/kube/token-review.ts";
import { openAIError } from "../lib/openai-error.ts";
import type { AdminRefusal } from "./admin-guard.ts";
import type { EventAction, EventSenders, SenderCheck } from "./event-senders.ts";

/** The audience a sender's token must be issued for, unless the activator is told another. */
export const defaultEventsAudience = "snooze.dev/events";

export interface KubeEventSendersOptions extends ReviewCacheOptions {
  client: KubeClient;
  /** The audience a token must be issued for (a Trigger's `spec.subscriber.audience`). */
  audience: string;
  /** The Model a model id is served by, `namespace` and `name`. */
  modelObjectOf(model: string): { namespace: string; name: string } | undefined;
}

/**
 * Event senders on Kubernetes: a token the API server says is valid for the events audience
 * (TokenReview with `spec.audiences`; Knative Eventing's OIDC sender identity mints such a token
 * for a Trigger whose subscriber names that audience), whose user the cluster's RBAC lets do each
 * event's verb (`wake`, `prewarm`, `sleep`, `stop`) on the event's Model (`models.snooze.dev`): a
 * SubjectAccessReview. So a Trigger that may prewarm one Model cannot stop another, and what a
 * sender may do is granted with a Role, as everything else on the cluster is.
 */
export class KubeEventSenders implements EventSenders {
  private readonly tokens: TokenReviewer;
  private readonly access: AccessReviewer;
  private readonly options: KubeEventSendersOptions;

  constructor(options: KubeEventSendersOptions) {
    this.options = options;
    const { cacheMs, maxEntries, now, reviewTimeoutMs, maxReviewsInFlight } = options;
    const cache = { cacheMs, maxEntries, now, reviewTimeoutMs, maxReviewsInFlight };
    this.tokens = new TokenReviewer(options.client, { ...cache, audiences: [options.audience] });
    this.access = new AccessReviewer(options.client, cache);
  }

  delivery(token: string): SenderCheck {
    let caller: Promise<CallerCheck> | undefined;
    const who = () => {
      caller ??= this.caller(token);
      return caller;
    };
    return {
      authenticate: async () => {
        const check = await who();
        return check.ok ? undefined : this.unauthenticated(check);
      },
      authorize: async (actions) => {
        const check = await who();
        return check.ok ? this.refusal(check, actions) : this.unauthenticated(check);
      },
    };
  }

  /** Who holds `token`: what cannot be valid for the audience by its own claims is refused without asking. */
  private async caller(token: string): Promise<CallerCheck> {
    // So a caller sending made-up tokens cannot turn each delivery into a TokenReview.
    const unfit = unfitFor(token, this.options.audience, (this.options.now ?? Date.now)());
    return unfit ? { ok: false, status: 401, message: unfit } : this.tokens.check(token);
  }

  private unauthenticated(check: Extract<CallerCheck, { ok: false }>): AdminRefusal {
    if (check.status === 503) return unavailable(check.message);
    return {
      status: 401,
      body: openAIError(
        `The events endpoint needs the admin token or a Kubernetes token issued for the audience ${this.options.audience} (a Knative Trigger's, with spec.subscriber.audience: ${this.options.audience} and Knative Eventing's authentication-oidc feature on): ${check.message}.`,
        "authentication_error",
        "invalid_sender_token",
      ),
      headers: { "www-authenticate": 'Bearer realm="snooze-admin"' },
    };
  }

  private async refusal(
    caller: Extract<CallerCheck, { ok: true }>,
    actions: readonly EventAction[],
  ): Promise<AdminRefusal | undefined> {
    const asked = new Set<string>();
    for (const { verb, model } of actions) {
      if (asked.has(`${verb} ${model}`)) continue;
      asked.add(`${verb} ${model}`);
      const object = this.options.modelObjectOf(model);
      if (!object)
        return forbidden(
          `${caller.username} may not ${verb} ${model}: it is not served by a Model this activator knows`,
        );
      const access = await this.access.check(caller, { group, resource: "models", verb, ...object });
      if (!access.ok)
        return access.status === 503
          ? unavailable(access.message)
          : forbidden(
              `${access.message}. To let it, bind it a Role in ${object.namespace} with the rule apiGroups: [${group}], resources: [models], verbs: [${verb}] (resourceNames: [${object.name}] for this Model alone).`,
            );
    }
    return undefined;
  }
}

/** Why `token` cannot be valid for `audience`, by what it claims of itself; undefined if it may be. */
function unfitFor(token: string, audience: string, now: number): string | undefined {
  const claims = audienceClaims(token);
  if (!claims) return "it is not a JWT";
  if (!claims.audiences.includes(audience))
    return `it is issued for ${claims.audiences.join(", ") || "no audience"}`;
  if (claims.expiresAt !== undefined && claims.expiresAt <= now) return "it has expired";
  return undefined;
}

const forbidden = (message: string): AdminRefusal => ({
  status: 403,
  body: openAIError(message, "permission_error", "sender_not_allowed"),
});

/** The API server could not answer: refused, never let through; Knative retries a 503. */
const unavailable = (message: string): AdminRefusal => ({
  status: 503,
  body: openAIError(message, "server_error", "sender_check_unavailable"),
  headers: { "retry-after": "5" },
});
