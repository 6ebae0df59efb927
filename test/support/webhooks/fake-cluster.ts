import type { ClusterReader } from "../../../webhooks/cluster.ts";
import { at, stringAt } from "../../../webhooks/object-path.ts";
import { modelReferences, type WorkloadKind } from "../../../webhooks/slot-members.ts";
import type { SlotState } from "../../../webhooks/slot-residency.ts";

/** An in-memory ClusterReader for tests of the webhook glue and the HTTP layer. */
export class FakeClusterReader implements ClusterReader {
  models: unknown[] = [];
  slots: unknown[] = [];
  workloads: { kind: "Deployment" | "StatefulSet"; object: unknown }[] = [];
  states = new Map<string, SlotState>();
  tiers = new Map<string, string | undefined>();
  leases = new Map<string, string>();
  /** Makes every fresh read fail or hang, to test how the server copes. */
  failReads: Error | "hang" | undefined;

  #key = (namespace: string, name: string) => `${namespace}/${name}`;
  #ns = (object: unknown) => stringAt(object, "metadata", "namespace") ?? "";
  #name = (object: unknown) => stringAt(object, "metadata", "name") ?? "";

  async #read<T>(value: T): Promise<T> {
    if (this.failReads === "hang") return new Promise<T>(() => {});
    if (this.failReads) throw this.failReads;
    return value;
  }

  modelsReferencing(namespace: string, kind: WorkloadKind, name: string) {
    return this.models.filter((m) => this.#ns(m) === namespace && modelReferences(m, kind, name));
  }
  cachedModel(namespace: string, name: string) {
    return this.models.find((m) => this.#ns(m) === namespace && this.#name(m) === name);
  }
  cachedSlot(namespace: string, name: string) {
    return this.slots.find((s) => this.#ns(s) === namespace && this.#name(s) === name);
  }
  readModel(namespace: string, name: string) {
    return this.#read(this.cachedModel(namespace, name));
  }
  readWorkload(namespace: string, kind: "Deployment" | "StatefulSet", name: string) {
    return this.#read(
      this.workloads.find(
        (w) => w.kind === kind && this.#ns(w.object) === namespace && this.#name(w.object) === name,
      )?.object,
    );
  }
  slotState(namespace: string, slot: string) {
    return this.#read(this.states.get(this.#key(namespace, slot)) ?? { residents: [] });
  }
  workloadTier(namespace: string, workload: unknown) {
    return this.#read(this.tiers.get(this.#key(namespace, String(at(workload, "metadata", "name")))));
  }
  leaseHolder(namespace: string, slot: string) {
    return this.#read(this.leases.get(this.#key(namespace, slot)));
  }
}
