import { X509Certificate } from "node:crypto";
import type { KubeConfig, V1MutatingWebhookConfiguration, V1Secret } from "@kubernetes/client-node";
import { describe, expect, test } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import { CertStore, type SecretApi, secretData, type WebhookConfigurationApi } from "./cert-store.ts";
import { certificateFacts, splitPem } from "./x509.ts";

/**
 * CertStore against an in-memory API with the apiserver's optimistic concurrency (a write with a
 * stale resourceVersion is a 409), so concurrent replicas and rotations run deterministically.
 */
class FakeApi {
  secret: V1Secret | undefined;
  configurations = new Map<string, V1MutatingWebhookConfiguration>();
  version = 0;
  conflicts = 0;

  #stamp<T extends { metadata?: { resourceVersion?: string } }>(object: T): T {
    return {
      ...structuredClone(object),
      metadata: { ...object.metadata, resourceVersion: String(++this.version) },
    };
  }

  core: SecretApi = {
    readNamespacedSecret: async () => {
      if (!this.secret) throw Object.assign(new Error("not found"), { code: 404 });
      return structuredClone(this.secret);
    },
    createNamespacedSecret: async ({ body }) => {
      if (this.secret) throw Object.assign(new Error("exists"), { code: 409 });
      this.secret = this.#stamp(body);
      return structuredClone(this.secret);
    },
    replaceNamespacedSecret: async ({ body }) => {
      if (body.metadata?.resourceVersion !== this.secret?.metadata?.resourceVersion) {
        this.conflicts++;
        throw Object.assign(new Error("conflict"), { code: 409 });
      }
      this.secret = this.#stamp(body);
      return structuredClone(this.secret);
    },
  } as SecretApi;

  #read = async ({ name }: { name: string }) => {
    const configuration = this.configurations.get(name);
    if (!configuration) throw Object.assign(new Error("not found"), { code: 404 });
    return structuredClone(configuration);
  };
  #replace = async ({ name, body }: { name: string; body: V1MutatingWebhookConfiguration }) => {
    if (body.metadata?.resourceVersion !== this.configurations.get(name)?.metadata?.resourceVersion) {
      this.conflicts++;
      throw Object.assign(new Error("conflict"), { code: 409 });
    }
    this.configurations.set(name, this.#stamp(body));
    return structuredClone(body);
  };

  admission = {
    readValidatingWebhookConfiguration: this.#read,
    readMutatingWebhookConfiguration: this.#read,
    replaceValidatingWebhookConfiguration: this.#replace,
    replaceMutatingWebhookConfiguration: this.#replace,
  } as unknown as WebhookConfigurationApi;

  addConfiguration(name: string, annotations: Record<string, string> = {}) {
    this.configurations.set(
      name,
      this.#stamp<V1MutatingWebhookConfiguration>({
        metadata: { name, annotations },
        webhooks: [
          { name: "a.snooze.dev", clientConfig: {}, admissionReviewVersions: ["v1"], sideEffects: "None" },
          { name: "b.snooze.dev", clientConfig: {}, admissionReviewVersions: ["v1"], sideEffects: "None" },
        ],
      }),
    );
  }

  trusted(name: string): string[][] {
    return (this.configurations.get(name)?.webhooks ?? []).map((w) =>
      splitPem(Buffer.from(w.clientConfig.caBundle ?? "", "base64").toString()).map(
        (pem) => certificateFacts(pem)!.fingerprint,
      ),
    );
  }
}

const hour = 3_600_000;
const policy = {
  caValidityMs: 90 * hour,
  certValidityMs: 30 * hour,
  hosts: ["snooze-webhooks.snooze-system.svc"],
};

function store(api: FakeApi, clock: { now: number }) {
  return new CertStore({
    kc: undefined as unknown as KubeConfig,
    namespace: "snooze-system",
    secretName: "snooze-webhook-certs",
    validatingConfiguration: "snooze-webhooks-validating",
    mutatingConfiguration: "snooze-webhooks",
    policy,
    log: silentLogger,
    now: () => clock.now,
    apis: { core: api.core, admission: api.admission },
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
    expect(api.configurations.has("snooze-webhooks-validating")).toBe(false);
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
