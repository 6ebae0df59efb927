import { afterAll, beforeAll } from "vitest";
import type { Pod } from "../../../lib/kube/pod-replica.ts";
import { createTestNamespace } from "../harness/namespace.ts";
import { type SuiteCluster, suiteCluster } from "../harness/suite.ts";
import { waitFor } from "../harness/wait.ts";
import {
  type Admin,
  adminClient,
  type Component,
  installIdentities,
  serviceAccountKubeconfig,
  startActivator,
  startAutoscaler,
} from "./snooze.ts";

type TestNamespace = Awaited<ReturnType<typeof createTestNamespace>>;

export interface KubeSnoozeSuite {
  cluster: SuiteCluster;
  /** The test file's own namespace; the components watch only it. */
  readonly ns: TestNamespace;
  readonly admin: Admin;
  /** A kubeconfig file per component, each for that component's own ServiceAccount. */
  readonly kubeconfigs: { autoscaler: string; activator: string };
  /** Every autoscaler running, by identity; each is stopped after the file. */
  readonly autoscalers: Map<string, Component>;
  /** The autoscaler the default start ran. */
  readonly autoscaler: Component;
  /** The activator stopped after the file; a test that restarts it sets the new one here. */
  activator: Component;
  /**
   * Starts `snooze autoscaler` as its ServiceAccount in the namespace, and adds it to `autoscalers`;
   * the default start's becomes `autoscaler`.
   */
  startAutoscaler(
    identity: string,
    more?: { extra?: string[]; env?: Record<string, string>; shutdownDelay?: string },
  ): Promise<Component>;
  /** Starts `snooze activator` as its ServiceAccount, sending demand to `autoscalerUrl`. */
  startActivator(
    identity: string,
    autoscalerUrl?: string,
    env?: Record<string, string>,
    host?: string,
    shutdownDelay?: string,
  ): Promise<Component>;
  /** The last lines of the autoscaler's and the activator's output, for failure messages. */
  logs(autoscalerLines: number, activatorLines: number): string;
  /**
   * Waits until `model`'s pods in the namespace pass `check` (asked every 100 ms) and returns them;
   * else fails saying `what` with the components' last lines.
   */
  waitPods(model: string, what: string, check: (pods: Pod[]) => boolean, timeoutMs?: number): Promise<Pod[]>;
}

export interface KubeSnoozeSuiteOptions {
  /** The namespace's prefix; a random suffix is added. */
  namespace: string;
  /** Creates what must exist before the components start (Deployments, Models, Slots). */
  objects?(suite: KubeSnoozeSuite): Promise<void>;
  /** Starts the components; by default one autoscaler and one activator sending demand to it. */
  start?(suite: KubeSnoozeSuite): Promise<void>;
  autoscaler?: string;
  activator?: string;
  /** Runs after the components stopped, before the namespace is removed. */
  teardown?(): Promise<void> | void;
}

/**
 * The shared preamble of the Kubernetes e2e files: the suite's cluster, Snooze's identities
 * (config/default's namespace, CRDs, ServiceAccounts, RBAC), the admin's client, a namespace of the
 * file's own, and `snooze autoscaler` and `snooze activator` as real processes, each as its own
 * ServiceAccount. Registers the beforeAll that sets it all up and the afterAll that stops the
 * components (resuming any that a test paused) and removes the namespace.
 */
export function kubeSnoozeSuite(options: KubeSnoozeSuiteOptions): KubeSnoozeSuite {
  const cluster = suiteCluster();
  let ns: TestNamespace | undefined;
  let admin: Admin | undefined;
  let kubeconfigs: { autoscaler: string; activator: string } | undefined;
  let autoscaler: Component | undefined;
  let activator: Component | undefined;
  const autoscalers = new Map<string, Component>();
  const set = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is not set up yet (beforeAll failed or has not run)`);
    return value;
  };

  const suite: KubeSnoozeSuite = {
    cluster,
    get ns() {
      return set(ns, "the namespace");
    },
    get admin() {
      return set(admin, "the admin client");
    },
    get kubeconfigs() {
      return set(kubeconfigs, "the components' kubeconfigs");
    },
    autoscalers,
    get autoscaler() {
      return set(autoscaler ?? autoscalers.values().next().value, "the autoscaler");
    },
    get activator() {
      return set(activator, "the activator");
    },
    set activator(component) {
      activator = component;
    },
    async startAutoscaler(identity, more = {}) {
      const component = await startAutoscaler(cluster, {
        namespace: suite.ns.name,
        identity,
        kubeconfig: suite.kubeconfigs.autoscaler,
        ...more,
      });
      autoscalers.set(identity, component);
      return component;
    },
    startActivator(identity, autoscalerUrl = suite.autoscaler.url, env, host, shutdownDelay) {
      return startActivator(cluster, {
        namespace: suite.ns.name,
        identity,
        kubeconfig: suite.kubeconfigs.activator,
        autoscalerUrl,
        env,
        host,
        shutdownDelay,
      });
    },
    waitPods: (model, what, check, timeoutMs = 30_000) =>
      waitFor(
        async () => {
          const pods = await suite.admin.pods(suite.ns.name, model);
          return check(pods) ? pods : undefined;
        },
        { what, timeoutMs, intervalMs: 100, detail: () => suite.logs(40, 30) },
      ),
    logs: (autoscalerLines, activatorLines) =>
      `autoscaler:\n${(autoscaler ?? autoscalers.values().next().value)?.process.tail(autoscalerLines)}\nactivator:\n${activator?.process.tail(activatorLines)}`,
  };

  beforeAll(async () => {
    await installIdentities(cluster);
    admin = await adminClient(cluster);
    ns = await createTestNamespace(cluster.admin, options.namespace);
    await options.objects?.(suite);
    kubeconfigs = {
      autoscaler: await serviceAccountKubeconfig(cluster, "snooze-autoscaler"),
      activator: await serviceAccountKubeconfig(cluster, "snooze-activator"),
    };
    if (options.start) {
      await options.start(suite);
    } else {
      autoscaler = await suite.startAutoscaler(options.autoscaler ?? "autoscaler-a");
      activator = await suite.startActivator(options.activator ?? "activator-a");
    }
  });

  afterAll(async () => {
    await activator?.stop();
    for (const a of autoscalers.values()) {
      // A test may have paused it (SIGSTOP); a stopped process cannot shut down.
      try {
        process.kill(a.process.pid, "SIGCONT");
      } catch {}
      await a.stop();
    }
    await options.teardown?.();
    await ns?.remove();
    await admin?.client.close();
  });

  return suite;
}
