import { setTimeout as sleep } from "node:timers/promises";
import { type Clock, systemClock } from "../../lib/clock.ts";
import type { LeftOutAlias } from "../../lib/kube/alias-holders.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, type KubeClient, type KubeObject, paths } from "../../lib/kube/client.ts";
import type { Condition } from "../../lib/kube/condition.ts";
import type { KubeModel } from "../../lib/kube/model-config.ts";
import type { ModelResource } from "../../lib/kube/model-resource.ts";
import type { Logger } from "../../lib/log.ts";
import { RewriteBackoff } from "../../lib/rewrite-backoff.ts";
import type { ModelController } from "../model-controller.ts";
import { modelStatus } from "../model-status.ts";

export interface ModelStatusWriterDeps {
  client: KubeClient;
  log: Logger;
  model(): KubeModel;
  controller(): ModelController | undefined;
  /** The Model object as last seen. */
  resource(): (ModelResource & KubeObject) | undefined;
  /** The selector of the Model's workload, for the scale subresource. */
  selector(): string;
  /** The key of the Model that serves this one's id in its place (an older one of the same id). */
  servedInstead?(): string | undefined;
  /** The aliases this Model lists that another Model has (alias-holders.ts). */
  aliasesLeftOut?(): LeftOutAlias[];
  holding(): boolean;
  /** For the Model of a Knative revision: whether it is ready for its Route (undefined: not one). */
  revisionReady?(): boolean | undefined;
  /** For the back-off of a write the API server refused; the system's when absent. */
  clock?: Clock;
}

/**
 * Writes a Model's status (what HPA, KEDA and `kubectl get models` read) whenever what the
 * controller observes changes: one write at a time, a conditional merge patch of the status
 * subresource; on 409 the Model is read again and the status computed again from it. A write the
 * API server refused otherwise (429, 500, away a moment) is made again with back-off
 * (lib/rewrite-backoff.ts) while this process leads the Model: before, it waited for the next
 * change, so a Model that then sat still would keep saying what it no longer was (HPA, KEDA and
 * activators read it).
 */
export class ModelStatusWriter {
  private readonly deps: ModelStatusWriterDeps;
  private dirty = false;
  private writing?: Promise<void>;
  private lastJson = "";
  private readonly rewrites: RewriteBackoff;
  readonly counts = { statusWrites: 0, statusConflicts: 0 };

  constructor(deps: ModelStatusWriterDeps) {
    this.deps = deps;
    this.rewrites = new RewriteBackoff(deps.clock ?? systemClock);
  }

  /** A new leadership writes at least once. */
  reset(): void {
    this.lastJson = "";
  }

  schedule(): void {
    if (!this.deps.holding()) return;
    this.dirty = true;
    if (this.writing) return;
    this.writing = (async () => {
      while (this.dirty && this.deps.holding()) {
        this.dirty = false;
        await this.write().then(
          () => this.rewrites.succeeded(),
          (error: unknown) => {
            const delayMs = this.rewrites.failed(() => this.schedule());
            this.deps.log.warn("status write failed; writing it again", { error, delayMs });
          },
        );
      }
    })().finally(() => {
      this.writing = undefined;
    });
  }

  private compute(resource: (ModelResource & KubeObject) | undefined) {
    const controller = this.deps.controller();
    if (!controller) return undefined;
    return modelStatus({
      ...controller.observation(),
      selector: this.deps.selector(),
      ...servedInstead(this.deps),
      ...aliasesOf(this.deps),
      revisionReady: this.deps.revisionReady?.(),
      generation: resource?.metadata.generation,
      desired: resource?.spec?.replicas,
      maxReplicas: resource?.spec?.maxReplicas ?? (resource ? 1 : undefined),
      previous: resource?.status?.conditions as Condition[] | undefined,
    });
  }

  private async write(): Promise<void> {
    let resource = this.deps.resource();
    if (!resource) return;
    const model = this.deps.model();
    const object = `${paths.custom(group, version, "models", model.namespace)}/${model.name}`;
    for (let attempt = 0; attempt < 10; attempt++) {
      if (!this.deps.holding()) return;
      const status = this.compute(resource);
      if (!status) return;
      const json = JSON.stringify(withoutTimes(status));
      if (json === this.lastJson && attempt === 0) return;
      try {
        await this.deps.client.patch(`${object}/status`, {
          metadata: { resourceVersion: resource.metadata.resourceVersion },
          // A merge patch keeps the fields it does not name: one that comes and goes is named null
          // when it went.
          status: { retryAt: null, ...status },
        });
        this.counts.statusWrites++;
        this.lastJson = json;
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
        this.counts.statusConflicts++;
        await sleep(Math.min(1_000, 20 * 2 ** attempt) * Math.random());
        resource = await this.deps.client.get<ModelResource & KubeObject>(object);
      }
    }
    this.dirty = true;
    this.deps.log.warn("status kept conflicting; trying again on the next pass");
  }
}

/** The status without transition times, to tell whether anything that matters changed. */
function withoutTimes(status: ReturnType<typeof modelStatus>) {
  return { ...status, conditions: status.conditions?.map(({ lastTransitionTime: _t, ...c }) => c) };
}

/** The Model serving this one's id in its place, with the id, for the status. */
function servedInstead(deps: ModelStatusWriterDeps) {
  const by = deps.servedInstead?.();
  return by === undefined ? {} : { servedInstead: { id: deps.model().config.id, by } };
}

/** The Model's aliases with those another Model has, when it lists any, for the status. */
function aliasesOf(deps: ModelStatusWriterDeps) {
  const listed = deps.model().config.aliases;
  return listed.length === 0 ? {} : { aliases: { leftOut: deps.aliasesLeftOut?.() ?? [] } };
}
