import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type Keda, kedaNamespace, requireKeda, startKeda } from "./components/keda.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { complete, modelObject, simDeployment } from "./components/snooze.ts";
import { type CertificateAuthority, createCA, type IssuedCert, issueCert } from "./harness/certs.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * KEDA's real operator (v2.21.0, built from the Go module) reaches Snooze's external scaler over
 * mutual TLS: `snooze autoscaler --grpc-tls-cert/--grpc-tls-key --grpc-client-ca`, and an
 * `external-push` trigger whose TriggerAuthentication gives KEDA `caCert`, `tlsClientCert` and
 * `tlsClientKey` from a Secret. Two triggers that cannot connect (another CA; no client
 * certificate) leave their ScaledObjects not Ready, and Snooze still wakes those Models itself. A
 * fourth reaches the scaler by a DNS name (checked against the certificate's DNS SANs) with its
 * credentials in a ClusterTriggerAuthentication, whose Secret lives in KEDA's own namespace.
 */

const trusted = "qwen"; // the CA that signed the serving certificate, and a client certificate
const wrongCa = "llama"; // another CA (and a good client certificate): KEDA distrusts the scaler
const noClientCert = "gemma"; // the right CA, no client certificate: the scaler refuses KEDA
const byName = "phi"; // scalerAddress localhost:<port>, credentials from a ClusterTriggerAuthentication
const models = [trusted, wrongCa, noClientCert, byName];
const kedaApi = "/apis/keda.sh/v1alpha1";
let keda: Keda | undefined;
let ca: CertificateAuthority;
let other: CertificateAuthority;
let client: IssuedCert;

const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-keda-tls",
  objects: async ({ admin, ns, cluster }) => {
    for (const model of models) {
      await admin.createDeployment(ns.name, simDeployment(cluster, model, { model }));
      await admin.createModel(
        ns.name,
        modelObject(model, { model, port: 8000, replicas: 0, sleepAfter: "4s" }),
      );
    }
  },
  start: async (s) => {
    const dir = join(s.cluster.info.dir, "keda-tls");
    await mkdir(dir, { recursive: true });
    ca = await createCA(dir, "scaler-ca");
    other = await createCA(dir, "other-ca");
    // KEDA dials 127.0.0.1:<port> (Go checks it against the IP SANs) or localhost:<port> (the DNS SANs).
    const serving = await issueCert(ca, dir, "scaler", {
      commonName: "snooze-autoscaler",
      ipAddresses: ["127.0.0.1"],
      dnsNames: ["localhost", "snooze-autoscaler.snooze-system.svc"],
      usage: "server",
    });
    client = await issueCert(ca, dir, "keda-client", { commonName: "keda-operator", usage: "client" });
    const tls = ["--grpc-tls-cert", serving.certPath, "--grpc-tls-key", serving.keyPath];
    await s.startAutoscaler("autoscaler-tls", { extra: [...tls, "--grpc-client-ca", ca.certPath] });
    s.activator = await s.startActivator("activator-tls");
  },
});

beforeAll(async () => {
  keda = await startKeda(suite.cluster, requireKeda());
}, 180_000);
afterAll(async () => {
  // KEDA's finalizers on ScaledObjects and TriggerAuthentications need the operator.
  await suite.admin.client.delete(`${kedaApi}/clustertriggerauthentications/${byName}`).catch(() => {});
  for (const kind of ["scaledobjects", "triggerauthentications"]) {
    const collection = `${kedaApi}/namespaces/${suite.ns.name}/${kind}`;
    for (const name of models) await suite.admin.client.delete(`${collection}/${name}`).catch(() => {});
    if (keda?.operator.running())
      await waitFor(
        async () => ((await suite.admin.client.list(collection)).items.length === 0 ? true : undefined),
        { what: `KEDA to let go of the ${kind}`, timeoutMs: 20_000 },
      ).catch((error: unknown) => console.warn(String(error)));
  }
  await keda?.stop();
});

const logs = () =>
  [
    `autoscaler:\n${suite.autoscaler.process.tail(12)}`,
    `activator:\n${suite.activator.process.tail(6)}`,
    `keda-operator:\n${keda?.operator.tail(15)}`,
  ].join("\n");
const condition = (object: any, type: string) =>
  object?.status?.conditions?.find((c: any) => c.type === type) as
    | { status: string; reason?: string; message?: string }
    | undefined;
const readScaledObject = (name: string) =>
  suite.admin.client.get<any>(`${kedaApi}/namespaces/${suite.ns.name}/scaledobjects/${name}`);
const waitScaledObject = (name: string, what: string, check: (so: any) => boolean, timeoutMs = 30_000) =>
  waitFor(async () => ((so) => (check(so) ? so : undefined))(await readScaledObject(name)), {
    what: `ScaledObject ${name}: ${what}`,
    timeoutMs,
    intervalMs: 250,
    detail: logs,
  });
const pushes = async (result: boolean) => {
  const text = await (await fetch(`${suite.autoscaler.url}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith("snooze_external_scaler_pushes_total{") && l.includes(`"${result}"`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
};

/**
 * The Secret, the TriggerAuthentication reading it, and the ScaledObject of `model`; with `cluster`,
 * a ClusterTriggerAuthentication (its Secret in KEDA's namespace) and the scaler dialled at `address`.
 */
async function scaleWithTls(
  model: string,
  pems: { caCert: string; tlsClientCert?: string; tlsClientKey?: string },
  options: { cluster?: boolean; address?: string } = {},
) {
  const ns = suite.ns.name;
  const { client: api } = suite.admin;
  const secretNs = options.cluster ? kedaNamespace : ns;
  await api.create(`/api/v1/namespaces/${secretNs}/secrets`, {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: model },
    stringData: {
      "ca.crt": pems.caCert,
      ...(pems.tlsClientCert ? { "tls.crt": pems.tlsClientCert, "tls.key": pems.tlsClientKey } : {}),
    },
  });
  const keys = { caCert: "ca.crt", tlsClientCert: "tls.crt", tlsClientKey: "tls.key" };
  const authKind = options.cluster ? "ClusterTriggerAuthentication" : "TriggerAuthentication";
  await api.create(
    options.cluster
      ? `${kedaApi}/clustertriggerauthentications`
      : `${kedaApi}/namespaces/${ns}/triggerauthentications`,
    {
      apiVersion: "keda.sh/v1alpha1",
      kind: authKind,
      metadata: { name: model },
      spec: {
        secretTargetRef: Object.entries(keys)
          .filter(([parameter]) => parameter in pems)
          .map(([parameter, key]) => ({ parameter, name: model, key })),
      },
    },
  );
  await api.create(`${kedaApi}/namespaces/${ns}/scaledobjects`, {
    apiVersion: "keda.sh/v1alpha1",
    kind: "ScaledObject",
    metadata: { name: model },
    spec: {
      scaleTargetRef: { apiVersion: "snooze.dev/v1alpha1", kind: "Model", name: model },
      pollingInterval: 10, // slow on purpose: a scale from zero within seconds was pushed
      cooldownPeriod: 300,
      minReplicaCount: 0,
      maxReplicaCount: 1,
      triggers: [
        {
          type: "external-push",
          // enableTLS as in config/samples/scaledobject-tls.yaml (TLS is on with caCert alone too).
          metadata: {
            scalerAddress: options.address ?? suite.autoscaler.grpcAddress!,
            enableTLS: "true",
            model,
          },
          authenticationRef: { name: model, ...(options.cluster ? { kind: authKind } : {}) },
        },
      ],
    },
  });
}

describe("KEDA's operator and Snooze's external scaler over mutual TLS", () => {
  test("with caCert, tlsClientCert and tlsClientKey KEDA is Ready, reads the metric, hears the push and scales the Model 0 → 1 on a held request", async () => {
    await scaleWithTls(trusted, {
      caCert: ca.certPem,
      tlsClientCert: client.certPem,
      tlsClientKey: client.keyPem,
    });
    const ready = await waitScaledObject(trusted, "Ready", (so) => condition(so, "Ready")?.status === "True");
    expect(condition(ready, "Ready")?.reason).toBe("ScaledObjectReady");
    // GetMetricSpec over TLS: KEDA made its HPA on Snooze's metric. GetMetrics: the adapter, through the operator.
    const hpa = await suite.admin.client.get<any>(
      `/apis/autoscaling/v2/namespaces/${suite.ns.name}/horizontalpodautoscalers/keda-hpa-${trusted}`,
    );
    expect(hpa.spec.metrics[0].external.metric.name).toBe("s0-snooze-demand");
    const metric = await suite.admin.client.get<any>(
      `/apis/external.metrics.k8s.io/v1beta1/namespaces/${suite.ns.name}/s0-snooze-demand?labelSelector=${encodeURIComponent(`scaledobject.keda.sh/name=${trusted}`)}`,
    );
    expect(metric.items).toEqual([expect.objectContaining({ value: "0" })]);
    // StreamIsActive over TLS: open (it heard "inactive"), then "active" for the held request.
    await waitFor(async () => ((await pushes(false)) > 0 ? true : undefined), {
      what: "KEDA's StreamIsActive stream open",
      timeoutMs: 20_000,
      detail: logs,
    });
    const sent = Date.now();
    const answer = complete(suite.activator.url, trusted);
    await waitFor(
      async () => ((await suite.admin.model(suite.ns.name, trusted)).spec.replicas === 1 ? true : undefined),
      { what: "KEDA scales the Model to 1", timeoutMs: 10_000, intervalMs: 50, detail: logs },
    );
    console.log(
      `e2e keda-tls: a held request to spec.replicas 1 by KEDA over mTLS took ${Date.now() - sent} ms`,
    );
    expect(await pushes(true)).toBeGreaterThan(0);
    await waitScaledObject(trusted, "Active", (so) => condition(so, "Active")?.status === "True", 10_000);
    const result = await answer;
    expect(result.status, `${result.text}\n${logs()}`).toBe(200);
  });

  test("a DNS name in scalerAddress, matched by the certificate's DNS SAN, with a ClusterTriggerAuthentication: Ready, and a held request scales the Model 0 → 1", async () => {
    const port = suite.autoscaler.grpcAddress!.split(":").at(-1);
    await scaleWithTls(
      byName,
      { caCert: ca.certPem, tlsClientCert: client.certPem, tlsClientKey: client.keyPem },
      { cluster: true, address: `localhost:${port}` },
    );
    const ready = await waitScaledObject(byName, "Ready", (so) => condition(so, "Ready")?.status === "True");
    expect(condition(ready, "Ready")?.reason).toBe("ScaledObjectReady");
    const answer = complete(suite.activator.url, byName);
    await waitFor(
      async () => ((await suite.admin.model(suite.ns.name, byName)).spec.replicas === 1 ? true : undefined),
      { what: "KEDA scales the Model to 1", timeoutMs: 10_000, intervalMs: 50, detail: logs },
    );
    const result = await answer;
    expect(result.status, `${result.text}\n${logs()}`).toBe(200);
  });

  test("another CA, or no client certificate: the ScaledObject is not Ready, KEDA logs the handshake error, and Snooze still wakes the Model for a held request", async () => {
    await scaleWithTls(wrongCa, {
      caCert: other.certPem,
      tlsClientCert: client.certPem,
      tlsClientKey: client.keyPem,
    });
    await scaleWithTls(noClientCert, { caCert: ca.certPem });
    for (const name of [wrongCa, noClientCert]) {
      const so = await waitScaledObject(name, "not Ready", (o) => condition(o, "Ready")?.status === "False");
      expect(condition(so, "Ready")?.message).toContain("no metric specs returned from scalers");
    }
    // Go's TLS client, per ScaledObject: it distrusts the scaler's certificate; the scaler asked for one.
    const logged = (name: string, error: string) =>
      keda!.operator
        .tail(400)
        .split("\n")
        .some((l) => l.includes(`"name": "${name}"`) && l.includes(error));
    await waitFor(
      async () =>
        logged(wrongCa, "x509: certificate signed by unknown authority") &&
        logged(noClientCert, "remote error: tls: certificate required")
          ? true
          : undefined,
      {
        what: "KEDA's operator logs both handshake errors",
        timeoutMs: 30_000,
        intervalMs: 250,
        detail: logs,
      },
    );
    for (const name of [wrongCa, noClientCert]) {
      const answer = await complete(suite.activator.url, name);
      expect(answer.status, `${answer.text}\n${logs()}`).toBe(200);
      expect((await suite.admin.model(suite.ns.name, name)).spec.replicas).toBe(0); // KEDA could not scale it
    }
  }, 120_000);
});
