import {
  isSnoozeClass,
  podAutoscalers,
  revisionLabel,
  serverlessServices,
} from "../../../lib/knative/autoscaler-class.ts";
import { knativeApiServed } from "../../../lib/knative/networking-served.ts";
import { group, version } from "../../../lib/kube/api-group.ts";
import {
  isConflict,
  isInvalid,
  isNotFound,
  type KubeClient,
  type KubeError,
  type KubeObject,
  paths,
} from "../../../lib/kube/client.ts";
import type { EventToRecord, ObjectReference } from "../../../lib/kube/event-recorder.ts";
import type { Informer } from "../../../lib/kube/informer.ts";
import { LeaseElector, type LeaseTiming, leaseName } from "../../../lib/kube/lease.ts";
import { kubeInformer } from "../../../lib/kube/list-watch.ts";
import type { ModelResource } from "../../../lib/kube/model-resource.ts";
import { type Pod, podLive, podUp } from "../../../lib/kube/pod-replica.ts";
import type { Logger } from "../../../lib/log.ts";
import { ensureOwnedModel } from "../owned-model.ts";
import { managedByLabel, managedByValue } from "../workload-models.ts";
import {
  autoscalerConfigMap,
  autoscalerDefaults,
  type KnativeDefaults,
  knativeDefaults,
  knativeSystemNamespace,
} from "./autoscaler-config.ts";
import { podAutoscalerStatus, sameStatus } from "./pa-status.ts";
import {
  modelForRevision,
  type PodAutoscaler,
  type PodAutoscalerStatus,
  type RevisionDeployment,
  revisionReady,
} from "./revision-model.ts";

type Model = ModelResource & KubeObject;

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

interface ServerlessService extends KubeObject {
  spec?: { mode?: string; objectRef?: unknown; protocolType?: string; numActivators?: number };
  status?: { serviceName?: string; privateServiceName?: string };
}

export interface KnativePodAutoscalersOptions {
  client: KubeClient;
  /** Only this namespace's PodAutoscalers; all when absent. */
  namespace?: string;
  leaseNamespace: string;
  identity: string;
  address?: string;
  leaseTiming?: LeaseTiming;
  informer?: { resyncMs?: number; staleMs?: number };
  /** The autoscaler's own caches, shared: Models, revision Deployments and pods. */
  models: Informer<Model>;
  deployments: Informer<RevisionDeployment>;
  pods: Informer<Pod>;
  /** Where Kubernetes Events go (the autoscaler's recorder): a revision Snooze runs no pod of is told so. */
  events?: { record(regarding: ObjectReference, event: EventToRecord): void };
  /** A PodAutoscaler came, changed or went (`namespace/name`, its revision's Model's key). */
  paChanged?(key: string): void;
  log: Logger;
}

/**
 * Snooze as a Knative autoscaler class: the reconciler of PodAutoscalers whose class is Snooze's
 * (Knative's KPA filters on its own class and leaves them alone). For each one it keeps:
 * - a Model named as the revision (revision-model.ts), which the autoscaler's controllers then
 *   drive like any Model: they scale the revision's Deployment and sleep and wake its pods;
 * - the ServerlessService, in Serve mode: Snooze's activator is in front of every Snooze-class
 *   revision (through Snooze's KIngress class), so Knative's activator never needs to be put in
 *   the path (Proxy mode) to hold requests at zero; Serve points the SKS's public Service at the
 *   revision's pods, as the HPA class does;
 * - the PA's status, from the Model's status, the Deployment and its pods (pa-status.ts), which is
 *   what makes Knative's revision reconciler mark the Revision Ready.
 * Knative's `config-autoscaler` (watched, by name, in `knative-serving`) gives the defaults of
 * min-scale, max-scale and initial-scale that a revision's annotations do not set; a change applies
 * to every revision's Model at once.
 * One autoscaler replica writes (a Lease in the autoscaler's namespace); the others only watch.
 */
export class KnativePodAutoscalers {
  private readonly options: KnativePodAutoscalersOptions;
  private readonly log: Logger;
  informers?: {
    pas: Informer<PodAutoscaler>;
    sks: Informer<ServerlessService>;
    config: Informer<ConfigMap>;
  };
  /** config-autoscaler's defaults: the last valid ones (Knative's own until one is read). */
  private defaults: KnativeDefaults = knativeDefaults;
  private configProblem?: string;
  private elector?: LeaseElector;
  private pending = false;
  private again = false;
  private running = false;
  private stopped = false;
  private readonly unsubscribe: (() => void)[] = [];
  readonly counts = { statusWrites: 0, modelsCreated: 0, modelsDeleted: 0, sksCreated: 0, conflicts: 0 };

  constructor(options: KnativePodAutoscalersOptions) {
    this.options = options;
    this.log = options.log;
  }

  /**
   * Whether the revision whose Model is `key` is ready for its Route (revision-model.ts
   * `revisionReady`); undefined when no Snooze-class PodAutoscaler is that Model's.
   */
  revisionReady(key: string): boolean | undefined {
    const pa = this.informers?.pas.get(key);
    return pa && isSnoozeClass(pa.metadata.annotations) ? revisionReady(pa) : undefined;
  }

  get synced(): boolean {
    return (
      !this.informers ||
      (this.informers.pas.synced && this.informers.sks.synced && this.informers.config.synced)
    );
  }

  /** Starts when Knative Serving's autoscaling API is served; a cluster without it is left alone. */
  async start(address = this.options.address): Promise<void> {
    if (this.stopped || !(await knativeApiServed(this.options.client, podAutoscalers, this.log))) return;
    const { client, namespace, informer } = this.options;
    const common = { log: this.log, ...informer };
    this.informers = {
      pas: kubeInformer<PodAutoscaler>(
        client,
        paths.custom(podAutoscalers.group, podAutoscalers.version, podAutoscalers.plural, namespace),
        { name: "podautoscalers", ...common },
      ),
      sks: kubeInformer<ServerlessService>(
        client,
        paths.custom(
          serverlessServices.group,
          serverlessServices.version,
          serverlessServices.plural,
          namespace,
        ),
        { name: "serverlessservices", ...common },
      ),
      // One ConfigMap, by name: the RBAC grants only it (resourceNames needs the field selector).
      config: kubeInformer<ConfigMap>(client, paths.configMaps(knativeSystemNamespace), {
        name: "config-autoscaler",
        fieldSelector: `metadata.name=${autoscalerConfigMap}`,
        ...common,
      }),
    };
    const changed = () => this.schedule();
    const handler = { add: changed, update: changed, delete: changed };
    const paChanged = (pa: PodAutoscaler) => {
      this.schedule();
      this.options.paChanged?.(`${pa.metadata.namespace}/${pa.metadata.name}`);
    };
    this.unsubscribe.push(
      this.informers.pas.on({ add: paChanged, update: paChanged, delete: paChanged }),
      this.informers.sks.on(handler),
      this.informers.config.on(handler),
    );
    // Model status, the Deployment's replicas and the pods' readiness are what the PA's status says.
    const relevant = (object: KubeObject) => object.metadata.labels?.[revisionLabel] !== undefined;
    const ifRevision = (object: KubeObject) => relevant(object) && this.schedule();
    const revisionHandler = { add: ifRevision, update: ifRevision, delete: ifRevision };
    const ifOurs = (model: Model) =>
      model.metadata.ownerReferences?.some((o) => o.kind === podAutoscalers.kind) && this.schedule();
    this.unsubscribe.push(
      this.options.models.on({ add: ifOurs, update: ifOurs, delete: ifOurs }),
      this.options.deployments.on(revisionHandler),
      this.options.pods.on(revisionHandler),
    );
    await Promise.all([
      this.informers.pas.start(),
      this.informers.sks.start(),
      this.informers.config.start(),
    ]);
    this.elector = new LeaseElector({
      client,
      namespace: this.options.leaseNamespace,
      name: leaseName("snooze-knative", ...(namespace ? [namespace] : [])),
      identity: this.options.identity,
      address,
      timing: this.options.leaseTiming,
      log: this.log,
      onStartedLeading: () => this.schedule(),
    });
    this.elector.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const off of this.unsubscribe.splice(0)) off();
    await this.elector?.stop(true);
    await Promise.all([
      this.informers?.pas.stop(),
      this.informers?.sks.stop(),
      this.informers?.config.stop(),
    ]);
  }

  /** One sync at a time, 50 ms after the first change (a pod's status comes in bursts). */
  private schedule(): void {
    if (this.stopped || !this.elector?.leading) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      this.running = true;
      void this.sync()
        .catch((error: unknown) => this.log.warn("reconciling Snooze-class PodAutoscalers failed", { error }))
        .finally(() => {
          this.running = false;
          if (this.again) {
            this.again = false;
            this.schedule();
          }
        });
    }, 50).unref();
  }

  /** config-autoscaler's defaults; an invalid ConfigMap (Knative refuses it too) keeps the last. */
  private readDefaults(): KnativeDefaults {
    const map = this.informers!.config.get(`${knativeSystemNamespace}/${autoscalerConfigMap}`);
    const read = autoscalerDefaults(map?.data);
    if (read.problem !== undefined) {
      if (read.problem !== this.configProblem)
        this.log.warn("Knative's config-autoscaler is not valid; keeping the defaults read before", {
          problem: read.problem,
          defaults: this.defaults,
        });
      this.configProblem = read.problem;
      return this.defaults;
    }
    this.configProblem = undefined;
    if (JSON.stringify(read.defaults) !== JSON.stringify(this.defaults))
      this.log.info("Knative's autoscaling defaults (config-autoscaler)", { defaults: read.defaults });
    this.defaults = read.defaults;
    return this.defaults;
  }

  private async sync(): Promise<void> {
    const { pas } = this.informers!;
    const defaults = this.readDefaults();
    // A revision's pods, by `namespace/revision`: one pass over the pods, not one per PodAutoscaler.
    const podsOf = new Map<string, Pod[]>();
    for (const pod of this.options.pods.list()) {
      const revision = pod.metadata.labels?.[revisionLabel];
      if (revision === undefined) continue;
      const key = `${pod.metadata.namespace}/${revision}`;
      const list = podsOf.get(key);
      if (list) list.push(pod);
      else podsOf.set(key, [pod]);
    }
    const wanted = new Set<string>();
    for (const pa of pas.list()) {
      if (!isSnoozeClass(pa.metadata.annotations) || pa.metadata.deletionTimestamp) continue;
      const key = `${pa.metadata.namespace}/${pa.metadata.name}`;
      wanted.add(key);
      try {
        await this.reconcile(pa, podsOf.get(key) ?? [], defaults);
      } catch (error) {
        if (isConflict(error)) {
          // Someone wrote in between (Knative's revision reconciler updates the PA's spec): again.
          this.counts.conflicts++;
          this.again = true;
        } else this.log.warn("reconciling a PodAutoscaler failed", { podAutoscaler: key, error });
      }
    }
    // A Model made for a PA that is gone (or no longer Snooze's class) goes too; the garbage
    // collector would delete it with its owner, but a cluster may not run one for a while.
    for (const model of this.options.models.list()) {
      const key = `${model.metadata.namespace}/${model.metadata.name}`;
      if (wanted.has(key) || model.metadata.labels?.[managedByLabel] !== managedByValue) continue;
      if (!model.metadata.ownerReferences?.some((o) => o.kind === podAutoscalers.kind)) continue;
      await this.options.client
        .delete(this.modelPath(model.metadata.namespace!, model.metadata.name), {
          preconditions: { uid: model.metadata.uid },
        })
        .then(
          () => {
            this.counts.modelsDeleted++;
            this.log.info("deleted the Model of a revision that is not Snooze's class any more", {
              model: key,
            });
          },
          (error: unknown) => {
            if (!isNotFound(error) && !isConflict(error)) throw error;
          },
        );
    }
  }

  private async reconcile(pa: PodAutoscaler, pods: readonly Pod[], defaults: KnativeDefaults): Promise<void> {
    const namespace = pa.metadata.namespace!;
    const name = pa.metadata.name;
    const key = `${namespace}/${name}`;
    const deploymentName = pa.spec?.scaleTargetRef?.name;
    const deployment = deploymentName
      ? this.options.deployments.get(`${namespace}/${deploymentName}`)
      : undefined;
    const result = modelForRevision(pa, deployment, defaults);
    const problems = result.problems ?? (await this.ensureModel(key, result.model));
    if (problems) {
      this.log.warn("a Snooze-class revision's settings are not valid; no Model, no pods", {
        podAutoscaler: key,
        problems,
      });
      await this.scaleAway(namespace, deployment);
    }
    const sks = await this.ensureSks(pa);
    const status = podAutoscalerStatus({
      pa,
      model: this.options.models.get(key)?.status,
      problems,
      deploymentReplicas: deployment?.spec?.replicas,
      podsUp: pods.filter((p) => podLive(p) && podUp(p)).length,
      sks,
      defaults,
      now: Date.now(),
    });
    if (sameStatus(pa.status, status)) return;
    await this.options.client.replace(`${this.paPath(namespace, name)}/status`, { ...pa, status });
    this.counts.statusWrites++;
    if (problems) this.tellRevision(pa, status);
  }

  /**
   * A Warning Event on the revision whose settings keep Snooze from running it, once per new
   * verdict (when its PA's Ready message changes): `kubectl describe revision` and `kubectl get
   * events` show why beside Knative's own "Initial scale was never achieved".
   */
  private tellRevision(pa: PodAutoscaler, status: PodAutoscalerStatus): void {
    const ready = (s?: PodAutoscalerStatus) => s?.conditions?.find((c) => c.type === "Ready");
    const now = ready(status);
    if (!now?.message || ready(pa.status)?.message === now.message) return;
    const revision = pa.metadata.ownerReferences?.find((o) => o.kind === "Revision");
    this.options.events?.record(
      {
        apiVersion: "serving.knative.dev/v1",
        kind: "Revision",
        namespace: pa.metadata.namespace!,
        name: revision?.name ?? pa.metadata.name,
        ...(revision?.uid ? { uid: revision.uid } : {}),
      },
      { type: "Warning", reason: "InvalidSettings", action: "Scale", note: now.message },
    );
  }

  /**
   * Creates the revision's Model, or replaces it when what the revision asks for changed. Resolves
   * to the problems when the API server refuses the Model as it is (422: the Model's schema, say a
   * served name with a space read from the container's args), which only a new revision changes:
   * the PA then says so, as for invalid annotations, rather than staying without a status.
   */
  private async ensureModel(key: string, desired: Model): Promise<string[] | undefined> {
    const owner = { kind: podAutoscalers.kind, name: desired.metadata.name };
    let result: Awaited<ReturnType<typeof ensureOwnedModel>>;
    try {
      result = await ensureOwnedModel(this.options.client, this.options.models.get(key), desired, owner);
    } catch (error) {
      if (!isInvalid(error)) throw error;
      return [`the API server refuses its Model: ${(error as KubeError).detail}`];
    }
    if (result === "foreign")
      this.log.info("a Model of the revision's name exists and is not the autoscaler's; leaving it", {
        model: key,
      });
    if (result === "created" || result === "replaced") {
      this.counts.modelsCreated++;
      this.log.info("created the Model of a Snooze-class revision", { model: key });
    }
    return undefined;
  }

  /**
   * Scales the revision's Deployment to zero: without a Model nothing sleeps, wakes or routes to
   * its pods, so the ones Knative started for its initial scale would run unmanaged for as long as
   * the revision exists, each holding its accelerator. The KPA, too, leaves a revision that could
   * not be made ready at zero. Its PA is not Ready (pa-status.ts), so Knative marks the revision
   * failed and keeps routing the one before.
   */
  private async scaleAway(namespace: string, deployment: RevisionDeployment | undefined): Promise<void> {
    if (!deployment || (deployment.spec?.replicas ?? 0) === 0) return;
    const name = `${namespace}/${deployment.metadata.name}`;
    // A failed scale is tried again on the next sync; it does not keep the PA's status from saying why.
    await this.options.client
      .patch(`${paths.apps("deployments", namespace)}/${deployment.metadata.name}/scale`, {
        spec: { replicas: 0 },
      })
      .then(
        () =>
          this.log.info("scaled away the pods of a revision whose settings are not valid", {
            deployment: name,
          }),
        (error: unknown) =>
          this.log.warn("scaling away a revision's pods failed", { deployment: name, error }),
      );
  }

  /** The PA's ServerlessService in Serve mode, as Knative's autoscalers make it (MakeSKS). */
  private async ensureSks(pa: PodAutoscaler): Promise<ServerlessService | undefined> {
    const namespace = pa.metadata.namespace!;
    const name = pa.metadata.name;
    // No numActivators: Knative's defaulting webhook removes a 0 ("all activators"), so a 0
    // written here would differ from what is stored on every compare and be written forever;
    // no activator of Knative's is in the path in Serve mode anyway.
    const spec = {
      mode: "Serve",
      objectRef: pa.spec?.scaleTargetRef,
      protocolType: pa.spec?.protocolType ?? "http1",
    };
    const existing = this.informers!.sks.get(`${namespace}/${name}`);
    const collection = paths.custom(
      serverlessServices.group,
      serverlessServices.version,
      serverlessServices.plural,
      namespace,
    );
    if (!existing) {
      const created = await this.options.client.create<ServerlessService>(collection, {
        apiVersion: `${serverlessServices.group}/${serverlessServices.version}`,
        kind: serverlessServices.kind,
        metadata: {
          name,
          namespace,
          labels: { ...pa.metadata.labels },
          ownerReferences: [
            {
              apiVersion: `${podAutoscalers.group}/${podAutoscalers.version}`,
              kind: podAutoscalers.kind,
              name,
              uid: pa.metadata.uid ?? "",
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec,
      });
      this.counts.sksCreated++;
      return created;
    }
    if (
      !existing.metadata.ownerReferences?.some(
        (o) => o.kind === podAutoscalers.kind && o.uid === pa.metadata.uid,
      )
    ) {
      this.log.warn("a ServerlessService of the revision's name is not its PodAutoscaler's; leaving it", {
        serverlessService: `${namespace}/${name}`,
      });
      return undefined;
    }
    const same = (Object.keys(spec) as (keyof typeof spec)[]).every(
      (k) => JSON.stringify(existing.spec?.[k]) === JSON.stringify(spec[k]),
    );
    if (same) return existing;
    return this.options.client.replace<ServerlessService>(`${collection}/${name}`, {
      ...existing,
      spec: { ...existing.spec, ...spec },
    });
  }

  /**
   * Whether the Snooze-class revision whose Deployment `namespace/deployment` is has not reached
   * its initial scale yet (its PA's ScaleTargetInitialized is not True): a pod of it that cannot
   * start is kept rather than scaled away (`keepFailedStarts`), since Knative marks a revision
   * failed as soon as its PA is not Ready before then, and the kubelet may yet start the pod.
   */
  initializing(namespace: string, revision: string, deployment: string): boolean {
    const pa = this.informers?.pas.get(`${namespace}/${revision}`);
    if (!pa || !isSnoozeClass(pa.metadata.annotations) || pa.spec?.scaleTargetRef?.name !== deployment)
      return false;
    return !pa.status?.conditions?.some((c) => c.type === "ScaleTargetInitialized" && c.status === "True");
  }

  private paPath(namespace: string, name: string): string {
    return `${paths.custom(podAutoscalers.group, podAutoscalers.version, podAutoscalers.plural, namespace)}/${name}`;
  }

  private modelPath(namespace: string, name: string): string {
    return `${paths.custom(group, version, "models", namespace)}/${name}`;
  }

  state() {
    return {
      enabled: this.informers !== undefined,
      leading: this.elector?.leading ?? false,
      defaults: this.defaults,
      ...(this.configProblem ? { configProblem: this.configProblem } : {}),
      counts: this.counts,
    };
  }
}
