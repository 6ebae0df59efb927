import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "node:tls";
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { secretData } from "../../webhooks/certs/cert-store.ts";
import { createCA, splitPem } from "../../webhooks/certs/x509.ts";
import { errorText } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import type { ManagedProcess } from "./harness/process.ts";
import { suiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";
import {
  certSecret,
  configurationName,
  installSnoozeIdentity,
  registerWebhooks,
  resetCertificates,
  startWebhooksProcess,
  system,
  waitForReadyLog,
  webhooksKubeconfig,
} from "./webhooks-fixture.ts";

/**
 * Snooze's own certificates on the real apiserver: two `snooze webhooks` processes (replicas on one
 * port, SO_REUSEPORT) with their ServiceAccount start on an empty Secret and agree on one CA; under
 * a steady stream of admission requests the serving certificate rotates every few seconds, the CA
 * once, and both processes are restarted one after the other, and not one request fails. Times are
 * scaled down: a serving certificate lives 12 s, a CA 40 s.
 */
const cluster = suiteCluster();
let ns: Awaited<ReturnType<typeof createTestNamespace>>;
let port: number;
let kubeconfigPath: string;
let removeConfigurations: () => Promise<void> = async () => {};
const processes: ManagedProcess[] = [];
const core = () => cluster.admin.makeApiClient(CoreV1Api);
const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

function start(name: string): ManagedProcess {
  const process = startWebhooksProcess({
    kubeconfigPath,
    port,
    logPath: join(cluster.info.dir, `snooze-webhooks-${name}.log`),
    args: ["--ca-validity", "40s", "--cert-validity", "12s", "--cert-resync", "2s", "--shutdown-grace", "5s"],
  });
  processes.push(process);
  return process;
}

const readCerts = async () =>
  secretData(await core().readNamespacedSecret({ namespace: system, name: certSecret }));

/** The certificate a new TLS connection to the port is served (whichever process accepts it). */
const servedFingerprint = (ca: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, ca }, () => {
      resolve(socket.getPeerX509Certificate()!.fingerprint256);
      socket.end();
    });
    socket.on("error", reject);
  });

beforeAll(async () => {
  await installSnoozeIdentity(cluster);
  await resetCertificates(cluster.admin);
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-webhook-certs");
  await core().patchNamespace(
    { name: ns.name, body: { metadata: { labels: { "snooze.dev/webhooks": "enabled" } } } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
  port = await freePort();
  removeConfigurations = await registerWebhooks(cluster.admin, port, [ns.name]);
  kubeconfigPath = await webhooksKubeconfig(cluster, "webhooks-certs.kubeconfig");
});

afterAll(async () => {
  await removeConfigurations();
  await Promise.all(processes.map((p) => p.stop(5_000)));
  await ns?.remove();
  await resetCertificates(cluster.admin).catch(() => {});
});

const deployment = (n: number): V1Deployment => ({
  metadata: { name: `load-${n}`, annotations: { "snooze.dev/slot": "gpu-load" } },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: "load" } },
    template: { metadata: { labels: { app: "load" } }, spec: { containers: [{ name: "e", image: "vllm" }] } },
  },
});

test("two replicas agree on one CA; rotation and restarts under load lose no request", async () => {
  // Both start at once on an empty Secret: optimistic concurrency leaves one CA.
  const a = start("a");
  const b = start("b");
  await Promise.all([waitForReadyLog(a), waitForReadyLog(b)]);
  const first = await readCerts();
  expect(first.bundle).toHaveLength(1);
  const madeCA = (p: ManagedProcess) => (p.tail(1_000).match(/"msg":"made a new CA"/g) ?? []).length;
  expect(madeCA(a) + madeCA(b)).toBe(1);
  const ca = first.bundle[0]!;
  // Every connection, whichever replica takes it, is served the Secret's certificate.
  const seenAtStart = new Set<string>();
  for (let i = 0; i < 10; i++) seenAtStart.add(await servedFingerprint(ca));
  const current = await readCerts();
  expect(
    [...seenAtStart].every((f) => [first.cert, current.cert].map((c) => fingerprint(c!)).includes(f)),
  ).toBe(true);

  // Load: admission requests through the apiserver, each one mutated and validated by the webhooks.
  const apps = cluster.admin.makeApiClient(AppsV1Api);
  const failures: string[] = [];
  let answered = 0;
  let loading = true;
  const load = (async () => {
    for (let n = 0; loading && n < 2_000; n++) {
      try {
        const created = await apps.createNamespacedDeployment({
          namespace: ns.name,
          body: deployment(n),
          dryRun: "All",
        });
        if (
          created.spec?.replicas !== 1 ||
          created.spec.template.metadata?.annotations?.["snooze.dev/slot"] !== "gpu-load"
        )
          failures.push(`request ${n} was not mutated: ${JSON.stringify(created.spec)}`);
        answered++;
      } catch (error) {
        failures.push(`request ${n}: ${errorText(error)}`);
      }
      await sleep(100);
    }
  })();

  // Rotations, watched in the Secret.
  const servingCerts = new Set<string>([fingerprint(first.cert!)]);
  const cas = new Set<string>([fingerprint(ca)]);
  let watching = true;
  const watch = (async () => {
    while (watching) {
      const data = await readCerts().catch(() => undefined);
      if (data?.cert) servingCerts.add(fingerprint(data.cert));
      for (const pem of data?.bundle ?? []) cas.add(fingerprint(pem));
      await sleep(250);
    }
  })();

  try {
    // Restart the replicas one after the other, as a rolling update does.
    await sleep(8_000);
    await a.stop(10_000);
    const c = start("c");
    await waitForReadyLog(c);
    await sleep(8_000);
    await b.stop(10_000);
    const d = start("d");
    await waitForReadyLog(d);
    // Past the CA's rotation (at 2/3 of its 40 s) and the first CA's expiry.
    await waitFor(
      async () =>
        cas.size >= 2 && Date.now() - Date.parse(new X509Certificate(ca).validTo) > 3_000 ? true : undefined,
      {
        what: "a second CA and the first one expired",
        timeoutMs: 60_000,
        intervalMs: 500,
      },
    );
  } finally {
    loading = false;
    await load;
    watching = false;
    await watch;
  }
  expect(failures).toEqual([]);
  expect(answered).toBeGreaterThan(100);
  expect(servingCerts.size).toBeGreaterThanOrEqual(4);
  expect(cas.size).toBeGreaterThanOrEqual(2);

  // The configurations trust the Secret's CAs, and no longer the expired first one.
  const admission = cluster.admin.makeApiClient(AdmissionregistrationV1Api);
  await waitFor(
    async () => {
      const secret = await readCerts();
      const validating = await admission.readValidatingWebhookConfiguration({ name: configurationName });
      const mutating = await admission.readMutatingWebhookConfiguration({ name: configurationName });
      for (const webhook of [...(validating.webhooks ?? []), ...(mutating.webhooks ?? [])]) {
        const trusted = splitPem(Buffer.from(webhook.clientConfig.caBundle ?? "", "base64").toString()).map(
          fingerprint,
        );
        if (trusted.includes(fingerprint(ca))) return undefined;
        if (!secret.bundle.every((pem) => trusted.includes(fingerprint(pem)))) return undefined;
      }
      return true;
    },
    { what: "CA bundles pruned and current", timeoutMs: 15_000, intervalMs: 500 },
  );
});

test("a configuration annotated for cert-manager keeps the CA bundle cert-manager put there", async () => {
  const admission = cluster.admin.makeApiClient(AdmissionregistrationV1Api);
  const now = Date.now();
  const foreign = await createCA("cert-manager-stand-in", {
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3_600_000),
  });
  const bundle = Buffer.from(foreign.certPem).toString("base64");
  const configuration = await admission.readMutatingWebhookConfiguration({ name: configurationName });
  configuration.metadata!.annotations = { "cert-manager.io/inject-ca-from": `${system}/snooze-webhooks` };
  for (const webhook of configuration.webhooks ?? []) webhook.clientConfig.caBundle = bundle;
  await admission.replaceMutatingWebhookConfiguration({ name: configurationName, body: configuration });
  // Several resyncs (every 2 s) and a rotation later, it is still cert-manager's.
  await sleep(7_000);
  const after = await admission.readMutatingWebhookConfiguration({ name: configurationName });
  expect(after.webhooks?.map((w) => w.clientConfig.caBundle)).toEqual(after.webhooks?.map(() => bundle));
  // The other configuration, without the annotation, is still kept by Snooze.
  const validating = await admission.readValidatingWebhookConfiguration({ name: configurationName });
  expect(validating.webhooks?.[0]?.clientConfig.caBundle).not.toBe(bundle);
  expect(
    processes
      .filter((p) => p.running())
      .every((p) => /leaving its CA bundle to cert-manager/.test(p.tail(2_000))),
  ).toBe(true);
});
