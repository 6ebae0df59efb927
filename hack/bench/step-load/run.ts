// The seed-003 step-load experiment on the real loop: KEDA's HPA (the kube-controller-manager HPA
// controller, KEDA's operator and metrics adapter, built from their Go modules) scaling a Snooze
// Model on the demand the autoscaler serves, on the e2e harness's real control plane with the
// stand-in kubelet running a `snooze sim` per pod. Time-compressed 5×: a new pod warms up for 12 s
// (seed 003: 60 s), demand steps ×4 at t = 24 s (seed: 120 s), the HPA looks every second (seed's
// consumer: every 5 s). Three arms, in four pairs of alternating order, each pair replaying one
// frozen arrival trace:
//
//   ready-only       the HPA's divisor is ready replicas only (the Model CRD's scale subresource
//                    points status.replicas at status.readyReplicas for this arm)
//   ready+warming    as Snooze ships: status.replicas = ready + warming
//   sleepers-first   as shipped, with 3 replicas asleep before the step: woken first (seconds)
//
//   node_modules/.bin/node hack/bench/step-load/run.ts [--pairs 4] [--out /tmp/step-load.json]
//
// Needs hack/build-kube-assets.sh and hack/build-keda.sh to have run. 4 pairs take about 17 minutes.
// Results and what they mean: docs/benchmarks.md ("Step load on the real HPA and KEDA loop").
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { group, version } from "../../../lib/kube/api-group.ts";
import { type Keda, requireKeda, startKeda } from "../../../test/e2e/components/keda.ts";
import {
  type Admin,
  adminClient,
  type Component,
  installIdentities,
  modelObject,
  serviceAccountKubeconfig,
  simDeployment,
  startActivator,
  startAutoscaler,
  tierOf,
} from "../../../test/e2e/components/snooze.ts";
import { startControlPlane } from "../../../test/e2e/harness/control-plane.ts";
import { createTestNamespace } from "../../../test/e2e/harness/namespace.ts";
import { startStandInKubelet } from "../../../test/e2e/harness/stand-in-kubelet.ts";
import type { SuiteCluster } from "../../../test/e2e/harness/suite.ts";
import { waitFor } from "../../../test/e2e/harness/wait.ts";

export type Arm = "ready-only" | "ready+warming" | "sleepers-first";
export const arms: Arm[] = ["ready-only", "ready+warming", "sleepers-first"];

/** The workload, time-compressed 5× from seed 003's. */
export const shape = {
  warmUpMs: 12_000,
  stepAtMs: 24_000,
  durationMs: 60_000,
  baseRate: 1.5, // requests/s before the step: ~1.7 in flight, one replica at targetDemand 2
  stepFactor: 4,
  tokens: 50, // × 20 ms inter-token latency: about 1 s of generation per request
  targetDemand: 2,
  sleepers: 3,
  sampleMs: 250,
};

/** A seeded PRNG (mulberry32), so a pair's arms replay the same arrivals. */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Poisson arrivals (ms from the start): baseRate until the step, baseRate × stepFactor after. */
export function trace(seed: number): number[] {
  const next = random(seed);
  const out: number[] = [];
  let t = 0;
  while (true) {
    const rate = t < shape.stepAtMs ? shape.baseRate : shape.baseRate * shape.stepFactor;
    t += (-Math.log(1 - next()) / rate) * 1_000;
    if (t >= shape.durationMs) return out;
    out.push(Math.round(t));
  }
}

export interface Sample {
  at: number;
  spec: number;
  pods: number;
  ready: number;
  warming: number;
  sleeping: number;
}

export interface ArmResult {
  arm: Arm;
  pair: number;
  traceHash: string;
  requests: number;
  served: number;
  lost: number;
  ttfbP50Ms: number;
  ttfbP95Ms: number;
  podSeconds: number;
  awakeReplicaSeconds: number;
  peakPods: number;
  peakSpec: number;
  samples: Sample[];
}

const quantile = (values: number[], q: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
};

/** ∫ f dt over [0, end] of step samples, in seconds. */
export function integrate(samples: Sample[], f: (s: Sample) => number, endMs: number): number {
  let total = 0;
  for (let i = 0; i < samples.length; i++) {
    const from = samples[i]!.at;
    if (from >= endMs) break;
    const to = Math.min(samples[i + 1]?.at ?? endMs, endMs);
    total += f(samples[i]!) * Math.max(0, to - from);
  }
  return total / 1_000;
}

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/models.snooze.dev";

/** Points the Model scale subresource's status.replicas at `path` (ready-only: .status.readyReplicas). */
async function setStatusReplicasPath(admin: Admin, path: string) {
  const crd = await admin.client.get<{
    spec: { versions: { subresources?: { scale?: { statusReplicasPath: string } } }[] };
  }>(crdPath);
  for (const v of crd.spec.versions)
    if (v.subresources?.scale) v.subresources.scale.statusReplicasPath = path;
  await admin.client.replace(crdPath, crd);
}

async function runArm(
  cluster: SuiteCluster,
  admin: Admin,
  kubeconfigs: { autoscaler: string; activator: string },
  arm: Arm,
  pair: number,
  arrivals: number[],
  log: (line: string) => void,
): Promise<ArmResult> {
  const ns = await createTestNamespace(cluster.admin, `snooze-bench-step-${pair}`);
  const model = "qwen";
  const components: Component[] = [];
  const scaledObjects = `/apis/keda.sh/v1alpha1/namespaces/${ns.name}/scaledobjects`;
  try {
    await setStatusReplicasPath(admin, arm === "ready-only" ? ".status.readyReplicas" : ".status.replicas");
    await admin.createDeployment(
      ns.name,
      simDeployment(cluster, model, {
        model,
        loadTime: `${shape.warmUpMs}ms`,
        extraArgs: ["--itl", "20ms", "--max-num-seqs", "64"],
      }),
    );
    const initial = arm === "sleepers-first" ? 1 + shape.sleepers : 1;
    await admin.createModel(
      ns.name,
      modelObject(model, {
        model,
        port: 8000,
        replicas: initial,
        maxReplicas: 40,
        concurrency: shape.targetDemand,
        queueDepth: 100_000,
        holdBudget: "5m",
        sleepAfter: "1h",
        deepSleepAfter: "1h",
        zeroAfter: "2h",
      }),
    );
    const common = { namespace: ns.name };
    const autoscaler = await startAutoscaler(cluster, {
      ...common,
      identity: `bench-autoscaler-${pair}-${arm}`,
      kubeconfig: kubeconfigs.autoscaler,
    });
    components.push(autoscaler);
    const activator = await startActivator(cluster, {
      ...common,
      identity: `bench-activator-${pair}-${arm}`,
      kubeconfig: kubeconfigs.activator,
      autoscalerUrl: autoscaler.url,
    });
    components.push(activator);
    const pods = () => admin.pods(ns.name, model);
    await waitFor(
      async () => ((await pods()).filter((p) => tierOf(p) === "ready").length === initial ? true : undefined),
      {
        what: `${initial} pods ready`,
        timeoutMs: 120_000,
        intervalMs: 250,
      },
    );
    if (arm === "sleepers-first") {
      await admin.scaleModel(ns.name, model, 1);
      await waitFor(
        async () => {
          const p = await pods();
          return p.filter((x) => tierOf(x)?.startsWith("asleep")).length === shape.sleepers
            ? true
            : undefined;
        },
        { what: `${shape.sleepers} pods asleep`, timeoutMs: 60_000, intervalMs: 250 },
      );
    }
    await admin.client.create(scaledObjects, {
      apiVersion: "keda.sh/v1alpha1",
      kind: "ScaledObject",
      metadata: { name: model },
      spec: {
        scaleTargetRef: { apiVersion: `${group}/${version}`, kind: "Model", name: model },
        pollingInterval: 5,
        cooldownPeriod: 300,
        minReplicaCount: 1,
        maxReplicaCount: 40,
        advanced: {
          horizontalPodAutoscalerConfig: {
            behavior: {
              scaleUp: {
                stabilizationWindowSeconds: 0,
                policies: [{ type: "Pods", value: 40, periodSeconds: 1 }],
              },
              scaleDown: { stabilizationWindowSeconds: 60 },
            },
          },
        },
        triggers: [
          {
            type: "external-push",
            metadata: {
              scalerAddress: autoscaler.grpcAddress!,
              model,
              targetDemand: String(shape.targetDemand),
            },
          },
        ],
      },
    });
    await waitFor(
      async () => {
        const hpa = await admin.client.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
          `/apis/autoscaling/v2/namespaces/${ns.name}/horizontalpodautoscalers/keda-hpa-${model}`,
        );
        return hpa.status?.conditions?.some((c) => c.type === "ScalingActive" && c.status === "True")
          ? true
          : undefined;
      },
      { what: "KEDA's HPA active on the Model", timeoutMs: 90_000, intervalMs: 500 },
    );

    // The run: arrivals replayed open-loop; the Model and its pods sampled.
    const samples: Sample[] = [];
    const started = Date.now();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const [m, p] = await Promise.all([
          admin.model(ns.name, model).catch(() => undefined),
          pods().catch(() => undefined),
        ]);
        if (m && p)
          samples.push({
            at: Date.now() - started,
            spec: m.spec.replicas ?? 0,
            pods: p.length,
            ready: m.status?.readyReplicas ?? 0,
            warming: m.status?.warmingReplicas ?? 0,
            sleeping: m.status?.sleepingReplicas ?? 0,
          });
        await sleep(shape.sampleMs);
      }
    })();
    const outcomes: { status: number; ttfbMs: number }[] = [];
    const requests = arrivals.map(async (at) => {
      await sleep(Math.max(0, started + at - Date.now()));
      const sent = performance.now();
      try {
        const response = await fetch(`${activator.url}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model,
            prompt: "hello",
            max_tokens: shape.tokens,
            ignore_eos: true,
            stream: true,
          }),
          signal: AbortSignal.timeout(300_000),
        });
        const reader = response.body!.getReader();
        const first = await reader.read();
        const ttfbMs = performance.now() - sent;
        if (!first.done) while (!(await reader.read()).done);
        outcomes.push({ status: response.status, ttfbMs });
      } catch {
        outcomes.push({ status: -1, ttfbMs: performance.now() - sent });
      }
    });
    await Promise.all(requests);
    sampling = false;
    await sampler;

    const served = outcomes.filter((o) => o.status === 200);
    const window = samples.filter((s) => s.at <= shape.durationMs);
    const result: ArmResult = {
      arm,
      pair,
      traceHash: createHash("sha256").update(arrivals.join(",")).digest("hex").slice(0, 12),
      requests: arrivals.length,
      served: served.length,
      lost: outcomes.length - served.length,
      ttfbP50Ms: Math.round(
        quantile(
          served.map((o) => o.ttfbMs),
          0.5,
        ),
      ),
      ttfbP95Ms: Math.round(
        quantile(
          served.map((o) => o.ttfbMs),
          0.95,
        ),
      ),
      podSeconds: Math.round(integrate(samples, (s) => s.pods, shape.durationMs)),
      awakeReplicaSeconds: Math.round(integrate(samples, (s) => s.ready + s.warming, shape.durationMs)),
      peakPods: Math.max(...window.map((s) => s.pods)),
      peakSpec: Math.max(...window.map((s) => s.spec)),
      samples,
    };
    log(
      `pair ${pair} ${arm.padEnd(14)} trace ${result.traceHash}: peak ${result.peakSpec} wanted / ${result.peakPods} pods, ` +
        `${result.podSeconds} pod-s, ${result.awakeReplicaSeconds} awake replica-s, ttfb p95 ${result.ttfbP95Ms} ms, ` +
        `${result.served}/${result.requests} served, ${result.lost} lost`,
    );
    return result;
  } finally {
    await admin.client.delete(`${scaledObjects}/${model}`).catch(() => {});
    await waitFor(
      async () => ((await admin.client.list(scaledObjects)).items.length === 0 ? true : undefined),
      {
        what: "the ScaledObject gone",
        timeoutMs: 30_000,
      },
    ).catch(() => {});
    for (const c of components.reverse()) await c.stop(5_000).catch(() => {});
    await ns.remove();
  }
}

async function main() {
  const { values } = parseArgs({
    options: { pairs: { type: "string", default: "4" }, out: { type: "string" } },
  });
  const pairs = Number(values.pairs);
  const keda = requireKeda();
  const log = (line: string) => console.log(`step-load: ${line}`);
  const plane = await startControlPlane();
  let kedaRun: Keda | undefined;
  let kubelet: Awaited<ReturnType<typeof startStandInKubelet>> | undefined;
  let admin: Admin | undefined;
  try {
    kubelet = await startStandInKubelet(plane.kubeconfigPath, plane.admin, plane.dir);
    const current = plane.admin.getCurrentCluster();
    const cluster: SuiteCluster = {
      info: {
        kind: "local",
        dir: plane.dir,
        kubeconfigPath: plane.kubeconfigPath,
        kubectl: plane.kubectl,
        clientCA: plane.clientCA,
        server: current?.server ?? "",
        caPem: current?.caData ? Buffer.from(current.caData, "base64").toString() : "",
        kubelet: {
          nodeName: kubelet.nodeName,
          schedulerName: kubelet.schedulerName,
          selector: kubelet.selector,
          network: kubelet.network,
        },
      },
      admin: plane.admin,
      asUser: plane.asUser,
      asServiceAccount: plane.asServiceAccount,
    };
    await installIdentities(cluster);
    admin = await adminClient(cluster);
    kedaRun = await startKeda(cluster, keda);
    const kubeconfigs = {
      autoscaler: await serviceAccountKubeconfig(cluster, "snooze-autoscaler"),
      activator: await serviceAccountKubeconfig(cluster, "snooze-activator"),
    };
    log(`control plane, kubelet (${kubelet.network}) and KEDA up; work dir ${plane.dir}`);
    const results: ArmResult[] = [];
    for (let pair = 0; pair < pairs; pair++) {
      const arrivals = trace(1_000 + pair);
      const order = pair % 2 === 0 ? arms : [...arms].reverse();
      for (const arm of order)
        results.push(await runArm(cluster, admin, kubeconfigs, arm, pair, arrivals, log));
    }
    await setStatusReplicasPath(admin, ".status.replicas");
    const summary = summarize(results);
    console.log(JSON.stringify(summary, null, 2));
    if (values.out) {
      await mkdir(join(values.out, ".."), { recursive: true });
      await writeFile(values.out, `${JSON.stringify({ shape, summary, results }, null, 2)}\n`);
      log(`wrote ${values.out}`);
    }
  } finally {
    await kedaRun?.stop().catch(() => {});
    await admin?.client.close().catch(() => {});
    await kubelet?.stop().catch(() => {});
    await plane.stop();
  }
}

/** Per arm: medians over pairs, and each arm's ratio to ready-only within the same pair (median). */
export function summarize(results: ArmResult[]) {
  const median = (v: number[]) => {
    const sorted = [...v].sort((a, b) => a - b);
    const mid = sorted.length / 2;
    return sorted.length % 2 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const byArm = Object.fromEntries(
    arms.map((arm) => {
      const mine = results.filter((r) => r.arm === arm);
      const ratio = (f: (r: ArmResult) => number) =>
        median(
          mine.map((r) => {
            const base = results.find((b) => b.pair === r.pair && b.arm === "ready-only")!;
            return f(base) / f(r);
          }),
        );
      return [
        arm,
        {
          runs: mine.length,
          peakSpec: mine.map((r) => r.peakSpec),
          peakPods: mine.map((r) => r.peakPods),
          podSeconds: median(mine.map((r) => r.podSeconds)),
          awakeReplicaSeconds: median(mine.map((r) => r.awakeReplicaSeconds)),
          ttfbP95Ms: median(mine.map((r) => r.ttfbP95Ms)),
          served: mine.reduce((n, r) => n + r.served, 0),
          lost: mine.reduce((n, r) => n + r.lost, 0),
          podSecondsVsReadyOnly: Number(ratio((r) => r.podSeconds).toFixed(2)),
          awakeReplicaSecondsVsReadyOnly: Number(ratio((r) => r.awakeReplicaSeconds).toFixed(2)),
        },
      ];
    }),
  );
  return byArm;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
