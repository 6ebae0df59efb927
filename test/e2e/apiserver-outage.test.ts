import { execFileSync } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import { join } from "node:path";
import { AdmissionregistrationV1Api } from "@kubernetes/client-node";
import { describe, expect, test } from "vitest";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { complete, modelObject, simDeployment, tierOf } from "./components/snooze.ts";
import { createCA, issueCert } from "./harness/certs.ts";
import { usingExistingCluster } from "./harness/control-plane.ts";
import { startTcpService, type TcpService } from "./harness/tcp-service.ts";

/**
 * kube-apiserver stops answering while Snooze runs. Paused (SIGSTOP: its connections stay open and
 * hang, the worst kind of outage), a ready model keeps answering: the data plane does not need the
 * API server, and the autoscaler puts no engine to sleep under the activators while it cannot tell
 * them (the `draining` it writes first hangs with the API server). A wake does need it, as Knative's
 * scale from zero does: activators learn a replica's tier from its pod, so a request for a sleeping
 * model is held through the outage and answered once the API server is back. Restarted (Snooze's
 * components reach it through a TCP relay, which resets every connection and refuses new ones for a
 * while), a ready model keeps answering, and afterwards an idle engine is put to sleep only once the
 * activator's lagging watch has seen its drain. The outages stay under kube-controller-manager's and
 * the leases' deadlines.
 */
const model = "qwen";
let relay: TcpService | undefined;
const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-outage",
  objects: async ({ admin, ns, cluster }) => {
    await admin.createDeployment(ns.name, simDeployment(cluster, model, { model, loadTime: "500ms" }));
    await admin.createModel(
      ns.name,
      modelObject(model, { model, sleepAfter: "2s", maxReplicas: 1, port: 8000 }),
    );
  },
  start: async (suite) => {
    const server = new URL(suite.cluster.info.server);
    relay = await startTcpService([server.host]);
    // The serving certificate names 127.0.0.1, whatever the port: TLS passes through the relay.
    for (const path of [suite.kubeconfigs.autoscaler, suite.kubeconfigs.activator])
      await writeFile(
        path,
        (await readFile(path, "utf8")).replaceAll(server.origin, `https://${relay.address}`),
      );
    await suite.startAutoscaler("autoscaler-a");
    suite.activator = await suite.startActivator("activator-a");
  },
  teardown: () => relay?.close(),
});

const logs = () => suite.logs(40, 30);
const waitPods = (what: string, check: (p: Pod[]) => boolean, timeoutMs?: number) =>
  suite.waitPods(model, what, check, timeoutMs);
const asleep = (p: Pod[]) => p.length === 1 && tierOf(p[0]!) === "asleep-1";

/**
 * The TCP connections to the relay and to kube-apiserver, with their processes (`ss`), for a wait
 * that failed: whether a component holds a connection with nothing behind it. Once, in CI, the
 * autoscaler's calls all timed out after a restart while the activator's recovered, and its logs
 * could not say why.
 */
function connections(): string {
  const ports = [relay?.address, new URL(suite.cluster.info.server).host].map((address) =>
    address?.slice(address.lastIndexOf(":") + 1),
  );
  const filter = ports.map((port) => `sport = :${port} or dport = :${port}`).join(" or ");
  try {
    return execFileSync("ss", ["-tnpi", "state", "all", `( ${filter} )`], {
      encoding: "utf8",
      timeout: 5_000,
    });
  } catch (error) {
    return `ss failed: ${(error as Error).message}`;
  }
}

/** Pauses kube-apiserver; the returned call resumes it. */
function pauseApiServer(): () => void {
  const pid = suite.cluster.info.apiserverPid;
  if (pid === undefined) throw new Error("the local control plane did not say kube-apiserver's pid");
  process.kill(pid, "SIGSTOP");
  let resumed = false;
  return () => {
    if (resumed) return;
    resumed = true;
    process.kill(pid, "SIGCONT");
  };
}

describe.skipIf(usingExistingCluster())("kube-apiserver hangs while Snooze runs", () => {
  test("a ready model keeps answering, past its sleepAfter, and sleeps once the API server is back", async () => {
    const first = await complete(suite.activator.url, model);
    expect(first.status, first.text).toBe(200);
    const resume = pauseApiServer();
    try {
      const during = await complete(suite.activator.url, model, 5_000);
      expect(during.status, during.text).toBe(200);
      // Past sleepAfter (2 s) with the API server still away: the engine was not put to sleep under
      // the activator, which could not have heard of it.
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      const later = await complete(suite.activator.url, model, 5_000);
      expect(later.status, `${later.text}\n${logs()}`).toBe(200);
    } finally {
      resume();
    }
    await waitPods("the pod asleep after the outage", asleep);
    expect((await suite.admin.model(suite.ns.name, model)).status).toMatchObject({
      replicas: 0,
      sleepingReplicas: 1,
    });
  });

  test("a request for a sleeping model is held through the outage and answered after it", async () => {
    const started = await complete(suite.activator.url, model);
    expect(started.status, started.text).toBe(200);
    await waitPods("the pod asleep", asleep);
    const resume = pauseApiServer();
    let answer: ReturnType<typeof complete> | undefined;
    try {
      answer = complete(suite.activator.url, model, 30_000);
      const early = await Promise.race([
        answer,
        new Promise((resolve) => setTimeout(resolve, 3_000, "held")),
      ]);
      expect(early).toBe("held");
    } finally {
      resume();
    }
    const resumedAt = performance.now();
    const held = await answer!.catch((error: Error) => ({ status: 0, text: String(error), ms: 0 }));
    expect(held.status, `${held.text}\n${logs()}`).toBe(200);
    // Answered within seconds of the API server's return, not after a watch's stale timeout.
    expect(performance.now() - resumedAt, logs()).toBeLessThan(15_000);
    await waitPods("the pod asleep again", asleep);
  });

  test("kube-apiserver restarts (every connection reset, new ones refused for 5 s): served meanwhile, then the watches resume", async () => {
    const first = await complete(suite.activator.url, model);
    expect(first.status, first.text).toBe(200);
    const upstream = relay!.backends;
    relay!.backends = ["127.0.0.1:1"];
    relay!.reset();
    try {
      const during = await complete(suite.activator.url, model, 5_000);
      expect(during.status, during.text).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 4_000));
    } finally {
      relay!.backends = upstream;
    }
    // The components list and watch again: the idle model sleeps, and a request wakes it.
    await waitPods("the pod asleep after the restart", asleep, 45_000).catch((error: Error) => {
      throw new Error(`${error.message}\nconnections:\n${connections()}`);
    });
    const woken = await complete(suite.activator.url, model, 30_000).catch((error: Error) => ({
      status: 0,
      text: String(error),
      ms: 0,
    }));
    expect(woken.status, `${woken.text}\n${logs()}`).toBe(200);
    expect(suite.autoscaler.process.tail(400)).toMatch(/list or watch failed; retrying/);
  });

  test("a wake's tier write the API server refuses (429) is written again: the held request is answered", async () => {
    // An admission webhook makes kube-apiserver answer the autoscaler's first write of `ready` on
    // the pod with 429, as an API server that throttles does. Before, that write was never made
    // again: the pod said `waking` for good, and the request was held until its hold budget ran out.
    const started = await complete(suite.activator.url, model);
    expect(started.status, started.text).toBe(200);
    await waitPods("the pod asleep", asleep);
    const refusals = await refuseFirstReadyWrite();
    try {
      const held = await complete(suite.activator.url, model, 30_000).catch((error: Error) => ({
        status: 0,
        text: String(error),
        ms: 0,
      }));
      expect(refusals.count, logs()).toBe(1);
      expect(held.status, `${held.text}\n${logs()}`).toBe(200);
      expect(suite.autoscaler.process.tail(400)).toMatch(/tier write failed; writing it again/);
    } finally {
      await refusals.remove();
    }
    await waitPods("the pod asleep again", asleep);
  });
});

/**
 * A validating webhook on pod updates in the suite's namespace that refuses, with 429, the first
 * write that marks a pod `ready` (kube-apiserver passes a webhook's status code on).
 */
async function refuseFirstReadyWrite(): Promise<{ count: number; remove(): Promise<void> }> {
  const dir = join(suite.cluster.info.dir, "refusing-webhook");
  await mkdir(dir, { recursive: true });
  const ca = await createCA(dir, "refusing-ca");
  const serving = await issueCert(ca, dir, "refusing", {
    commonName: "refusing-webhook",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const refusals = { count: 0, remove: async () => {} };
  const tierOfObject = (o: Pod | undefined) => o?.metadata?.annotations?.["snooze.dev/tier"];
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      const review = JSON.parse(body) as { request: { uid: string; object?: Pod; oldObject?: Pod } };
      const { uid, object, oldObject } = review.request;
      const refuse =
        refusals.count === 0 && tierOfObject(object) === "ready" && tierOfObject(oldObject) !== "ready";
      if (refuse) refusals.count++;
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: {
            uid,
            allowed: !refuse,
            ...(refuse
              ? { status: { code: 429, reason: "TooManyRequests", message: "throttled (a test)" } }
              : {}),
          },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  const api = suite.cluster.admin.makeApiClient(AdmissionregistrationV1Api);
  const name = `refuse-ready-${suite.ns.name}`;
  await api.createValidatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: [
        {
          name: "refuse-ready.e2e.snooze.dev",
          clientConfig: {
            url: `https://127.0.0.1:${port}/`,
            caBundle: Buffer.from(ca.certPem).toString("base64"),
          },
          rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["pods"] }],
          namespaceSelector: {
            matchExpressions: [
              { key: "kubernetes.io/metadata.name", operator: "In", values: [suite.ns.name] },
            ],
          },
          failurePolicy: "Ignore",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
          timeoutSeconds: 5,
        },
      ],
    },
  });
  refusals.remove = async () => {
    await api.deleteValidatingWebhookConfiguration({ name }).catch(() => {});
    await new Promise((resolve) => server.close(resolve));
  };
  // The API server reads webhook configurations through an informer: give it a moment to see this one.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  return refusals;
}
