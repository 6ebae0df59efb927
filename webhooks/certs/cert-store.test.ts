import { X509Certificate } from "node:crypto";
import { describe, expect, test } from "vitest";
import { KubeError, type KubeObject, paths, type WebhookConfigurationKind } from "../../lib/kube/client.ts";
import { silentLogger } from "../../lib/log.ts";
import {
  CertStore,
  type CertStoreOptions,
  type Secret,
  secretData,
  type WebhookConfiguration,
} from "./cert-store.ts";
import { certificateFacts, splitPem } from "./x509.ts";

/**
 * CertStore against an in-memory API with the apiserver's optimistic concurrency (a write with a
 * stale resourceVersion is a 409), so concurrent replicas and rotations run deterministically.
 * Objects are stored by REST path, as lib/kube's client addresses them.
 */
class FakeApi {
  objects = new Map<string, KubeObject>();
  version = 0;
  conflicts = 0;

  #stamp<T extends KubeObject>(object: T): T {
    return {
      ...structuredClone(object),
      metadata: { ...object.metadata, resourceVersion: String(++this.version) },
    };
  }

  client: CertStoreOptions["client"] = {
    get: async <T>(path: string) => {
      const object = this.objects.get(path);
      if (!object) throw new KubeError(404, "NotFound", `${path} not found`);
      return structuredClone(object) as T;
    },
    create: async <T>(collection: string, body: unknown) => {
      const object = body as KubeObject;
      const path = `${collection}/${object.metadata.name}`;
      if (this.objects.has(path)) throw new KubeError(409, "AlreadyExists", `${path} exists`);
      this.objects.set(path, this.#stamp(object));
      return structuredClone(this.objects.get(path)) as T;
    },
    replace: async <T>(path: string, body: unknown) => {
      const object = body as KubeObject;
      if (object.metadata.resourceVersion !== this.objects.get(path)?.metadata.resourceVersion) {
        this.conflicts++;
        throw new KubeError(409, "Conflict", `${path} changed`);
      }
      this.objects.set(path, this.#stamp(object));
      return structuredClone(this.objects.get(path)) as T;
    },
  };

  get secret(): Secret | undefined {
    return this.objects.get(secretPath);
  }
  set secret(secret: Secret | undefined) {
    if (secret) this.objects.set(secretPath, secret);
    else this.objects.delete(secretPath);
  }

  configuration(name: string, kind: WebhookConfigurationKind = "MutatingWebhookConfiguration") {
    return this.objects.get(paths.webhookConfiguration(kind, name)) as WebhookConfiguration | undefined;
  }

  addConfiguration(name: string, annotations: Record<string, string> = {}) {
    this.objects.set(
      paths.webhookConfiguration("MutatingWebhookConfiguration", name),
      this.#stamp<WebhookConfiguration>({
        apiVersion: "admissionregistration.k8s.io/v1",
        kind: "MutatingWebhookConfiguration",
        metadata: { name, annotations },
        webhooks: [
          // Fields CertStore does not know must survive its writes (plain JSON, no typed model).
          { name: "a.snooze.dev", clientConfig: {}, admissionReviewVersions: ["v1"], sideEffects: "None" },
          { name: "b.snooze.dev", clientConfig: {}, admissionReviewVersions: ["v1"], sideEffects: "None" },
        ],
      }),
    );
  }

  trusted(name: string): string[][] {
    return (this.configuration(name)?.webhooks ?? []).map((w) =>
      splitPem(Buffer.from(w.clientConfig?.caBundle ?? "", "base64").toString()).map(
        (pem) => certificateFacts(pem)!.fingerprint,
      ),
    );
  }
}

const secretPath = paths.secret("snooze-system", "snooze-webhook-certs");

const hour = 3_600_000;
const policy = {
  caValidityMs: 90 * hour,
  certValidityMs: 30 * hour,
  hosts: ["snooze-webhooks.snooze-system.svc"],
};

function store(api: FakeApi, clock: { now: number }) {
  return new CertStore({
    client: api.client,
    namespace: "snooze-system",
    secretName: "snooze-webhook-certs",
    validatingConfiguration: "snooze-webhooks-validating",
    mutatingConfiguration: "snooze-webhooks",
    policy,
    log: silentLogger,
    now: () => clock.now,
  });
}

const fingerprint = (pem: string | undefined) => certificateFacts(pem ?? "")?.fingerprint;

describe("CertStore", () => {
  test("replicas starting together on nothing agree on one CA and one serving certificate", async () => {
    const api = new FakeApi();
    api.addConfiguration("snooze-webhooks");
    const clock = { now: Date.parse("2026-01-01T00:00:00Z") };
    const results = await Promise.all([
      store(api, clock).reconcile(),
      store(api, clock).reconcile(),
      store(api, clock).reconcile(),
    ]);
    const data = secretData(api.secret);
    expect(data.bundle).toHaveLength(1);
    for (const { serving } of results) expect(fingerprint(serving.certPem)).toBe(fingerprint(data.cert));
    // The 409 path ran: the losers read what the winner wrote.
    expect(api.conflicts).toBeGreaterThan(0);
    expect(api.trusted("snooze-webhooks")).toEqual([
      [fingerprint(data.bundle[0])],
      [fingerprint(data.bundle[0])],
    ]);
    // Plain JSON in and out: fields of the configuration that CertStore does not touch stay.
    expect(api.configuration("snooze-webhooks")?.webhooks?.[0]).toMatchObject({
      admissionReviewVersions: ["v1"],
      sideEffects: "None",
    });
  });

  test("rotation: serving certificates renew, a new CA is trusted before it signs, the expired CA goes", async () => {
    const api = new FakeApi();
    api.addConfiguration("snooze-webhooks");
    const t0 = Date.parse("2026-01-01T00:00:00Z");
    const clock = { now: t0 };
    const replica = store(api, clock);
    const reconciled = async () => {
      await replica.reconcile();
      return secretData(api.secret);
    };
    const first = await reconciled();
    const ca1 = fingerprint(first.bundle[0]);

    clock.now = t0 + 21 * hour; // serving certificate has less than a third left
    const second = await reconciled();
    expect(fingerprint(second.cert)).not.toBe(fingerprint(first.cert));
    expect(second.bundle.map(fingerprint)).toEqual([ca1]);

    clock.now = t0 + 61 * hour; // the CA has less than a third left: a new one joins the bundle
    const third = await reconciled();
    const ca2 = fingerprint(third.bundle[0]);
    expect(third.bundle.map(fingerprint)).toEqual([ca2, ca1]);
    expect(api.trusted("snooze-webhooks")[0]).toEqual([ca2, ca1]);
    // The new serving certificate (due anyway) is signed by the new CA, which the configuration trusts.
    expect(certificateFacts(third.cert!)?.notAfter).toBeGreaterThan(t0 + 61 * hour);
    expect(new X509Certificate(third.cert!).checkIssued(new X509Certificate(third.bundle[0]!))).toBe(true);

    clock.now = t0 + 91 * hour; // the first CA expired
    const fourth = await reconciled();
    expect(fourth.bundle.map(fingerprint)).toEqual([ca2]);
    expect(api.trusted("snooze-webhooks")[0]).toEqual([ca2]);
  });

  test("a configuration annotated for cert-manager is left alone; a missing one is no error", async () => {
    const api = new FakeApi();
    api.addConfiguration("snooze-webhooks", {
      "cert-manager.io/inject-ca-from": "snooze-system/snooze-webhooks",
    });
    await store(api, { now: Date.now() }).reconcile();
    expect(api.trusted("snooze-webhooks")).toEqual([[], []]);
    expect(api.configuration("snooze-webhooks-validating", "ValidatingWebhookConfiguration")).toBeUndefined();
  });

  test("a stale replica adds its CAs to a bundle but never removes a live one", async () => {
    const api = new FakeApi();
    api.addConfiguration("snooze-webhooks");
    const t0 = Date.parse("2026-01-01T00:00:00Z");
    await store(api, { now: t0 }).reconcile();
    const old = api.secret;
    // Another replica rotates the CA later; then the first one comes back with its old Secret.
    await store(api, { now: t0 + 61 * hour }).reconcile();
    const current = secretData(api.secret).bundle.map(fingerprint);
    const rotated = api.secret;
    api.secret = {
      ...old,
      metadata: { ...old!.metadata, resourceVersion: rotated!.metadata!.resourceVersion },
    };
    await store(api, { now: t0 + 62 * hour }).reconcile();
    for (const bundle of api.trusted("snooze-webhooks"))
      expect(bundle).toEqual(expect.arrayContaining(current));
  });
});
