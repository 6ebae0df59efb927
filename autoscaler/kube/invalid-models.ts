import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject, paths } from "../../lib/kube/client.ts";
import type { Condition } from "../../lib/kube/condition.ts";
import type { ModelResource, ModelStatusInput } from "../../lib/kube/model-resource.ts";
import type { Logger } from "../../lib/log.ts";
import { transitionTime } from "../model-status.ts";

type Model = ModelResource & KubeObject;

/**
 * The status of a Model whose spec Snooze cannot use (a value its CRD lets through but its schema
 * refuses, such as `startTimeout: "0"` or a `sleepAfter` longer than a timer waits, written where no
 * webhook checks it; or a Model stored before a schema change): phase Failed and a Ready condition
 * `InvalidSpec` that says which field and why. Pure.
 */
export function invalidModelStatus(model: Model, error: string, now: number): ModelStatusInput {
  const generation = model.metadata.generation;
  const since = transitionTime(model.status?.conditions as Condition[] | undefined, "Ready", "False", now);
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    phase: "Failed",
    conditions: [
      {
        type: "Ready",
        status: "False",
        reason: "InvalidSpec",
        message: `Snooze ignores this Model until its spec is fixed: ${error}`,
        lastTransitionTime: since,
        ...(generation !== undefined ? { observedGeneration: generation } : {}),
      },
    ],
  };
}

/**
 * Says in their status why Models are ignored, and logs it once per Model and spec (not at every
 * sync: a sync follows every Model's change). Written only by the replica that `leading()` (the
 * holder of the annotated workloads' Lease: one writer per watched scope), once per spec.
 */
export class InvalidModels {
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly leading: () => boolean;
  /** Per Model key, the generation and error last logged, and whether its status says it. */
  private readonly told = new Map<string, { what: string; written: boolean }>();

  constructor(options: { client: KubeClient; log: Logger; leading: () => boolean }) {
    this.client = options.client;
    this.log = options.log;
    this.leading = options.leading;
  }

  /** The Models that do not parse now, with why; those no longer among them are forgotten. */
  report(invalid: { model: Model; error: string }[]): void {
    const keys = new Set<string>();
    for (const { model, error } of invalid) {
      const key = `${model.metadata.namespace}/${model.metadata.name}`;
      keys.add(key);
      const what = `${model.metadata.generation ?? ""} ${error}`;
      let told = this.told.get(key);
      if (told?.what !== what) {
        this.log.warn("a Model's spec cannot be used; ignored until it is fixed", { model: key, error });
        told = { what, written: false };
        this.told.set(key, told);
      }
      if (!told.written && this.leading()) {
        told.written = true;
        void this.write(model, error).catch((e: unknown) => {
          told.written = false;
          if (!isConflict(e) && !isNotFound(e))
            this.log.warn("could not write why a Model is ignored to its status", { model: key, error: e });
        });
      }
    }
    for (const key of [...this.told.keys()]) if (!keys.has(key)) this.told.delete(key);
  }

  /** A new holder of the Lease writes each status again (its predecessor may not have). */
  reset(): void {
    for (const told of this.told.values()) told.written = false;
  }

  /** Conditional on the version read; a conflict reads it again, unless its spec changed (a sync follows). */
  private async write(model: Model, error: string): Promise<void> {
    const path = `${paths.custom(group, version, "models", model.metadata.namespace)}/${model.metadata.name}`;
    let current = model;
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await this.client.patch(`${path}/status`, {
          metadata: { resourceVersion: current.metadata.resourceVersion },
          status: { retryAt: null, ...invalidModelStatus(current, error, Date.now()) },
        });
        return;
      } catch (e) {
        if (!isConflict(e)) throw e;
        current = await this.client.get<Model>(path);
        if (current.metadata.generation !== model.metadata.generation) return;
      }
    }
  }
}
