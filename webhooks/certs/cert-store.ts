import {
  isConflict,
  isNotFound,
  type KubeClient,
  type KubeObject,
  paths,
  type WebhookConfigurationKind,
} from "../../lib/kube/client.ts";
import type { Logger } from "../../lib/log.ts";
import {
  type CertData,
  caValidity,
  liveBundle,
  mergeBundles,
  needsNewCA,
  needsNewServingCert,
  type RotationPolicy,
  servingValidity,
  usableServingCert,
} from "./rotation.ts";
import { type CertificatePem, createCA, issueServingCert, splitPem } from "./x509.ts";

/**
 * Snooze's own certificates for its webhooks, the way Knative's webhook manages them: one Secret
 * holds the CA bundle, the signing CA's key and the serving certificate; the CA bundle is written
 * into the ValidatingWebhookConfiguration and MutatingWebhookConfiguration; every replica runs the
 * same reconcile, and they agree through optimistic concurrency (the Secret's resourceVersion: a
 * 409 means another replica wrote first, so read again and use what it wrote).
 *
 * Order matters so that no replica ever serves a certificate the apiserver does not trust:
 * 1. a new CA is added to the Secret's bundle (the serving certificate stays);
 * 2. the configurations get the union of their CAs and the Secret's (a stale replica can only add
 *    CAs, never take a live one away; expired ones go);
 * 3. only then is a serving certificate signed by the new CA, and loaded.
 */
export interface CertStoreOptions {
  /** The API (tests pass an in-memory one with the apiserver's optimistic concurrency). */
  client: Pick<KubeClient, "get" | "create" | "replace">;
  namespace: string;
  secretName: string;
  validatingConfiguration?: string;
  mutatingConfiguration?: string;
  policy: RotationPolicy;
  log: Logger;
  now?: () => number;
}

/** A v1 Secret as the API serves it; plain JSON, so a replace keeps every field it does not touch. */
export interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

/** A Validating- or MutatingWebhookConfiguration: only the CA bundles are read and written. */
export interface WebhookConfiguration extends KubeObject {
  webhooks?: { name: string; clientConfig?: { caBundle?: string }; [field: string]: unknown }[];
}

export const certManagerAnnotation = "cert-manager.io/inject-ca-from";
const maxAttempts = 10;

const b64 = (text: string) => Buffer.from(text).toString("base64");
const unb64 = (text: string | undefined) => (text ? Buffer.from(text, "base64").toString("utf8") : undefined);

export function secretData(secret: Pick<Secret, "data"> | undefined): CertData {
  const data = secret?.data ?? {};
  return {
    bundle: splitPem(unb64(data["ca.crt"]) ?? ""),
    caKey: unb64(data["ca.key"]),
    cert: unb64(data["tls.crt"]),
    key: unb64(data["tls.key"]),
  };
}

function encode(data: CertData): Record<string, string> {
  return {
    "ca.crt": b64(data.bundle.join("")),
    ...(data.caKey ? { "ca.key": b64(data.caKey) } : {}),
    ...(data.cert ? { "tls.crt": b64(data.cert) } : {}),
    ...(data.key ? { "tls.key": b64(data.key) } : {}),
  };
}

export class CertStore {
  readonly #client: CertStoreOptions["client"];
  readonly #options: CertStoreOptions;
  readonly #now: () => number;
  #warned = new Set<string>();

  constructor(options: CertStoreOptions) {
    this.#options = options;
    this.#client = options.client;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Makes sure the Secret holds a CA and a serving certificate that are not due, and that the
   * webhook configurations trust the CA; resolves to the serving certificate to use and the data.
   */
  async reconcile(): Promise<{ serving: CertificatePem; data: CertData }> {
    const { policy, log } = this.#options;
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      let secret = await this.#readOrCreateSecret();
      const now = this.#now();
      let data = secretData(secret);
      data = { ...data, bundle: liveBundle(data.bundle, now) };

      if (needsNewCA(data, now, policy)) {
        const ca = await createCA(
          `snooze-webhooks-ca-${new Date(now).toISOString()}`,
          caValidity(now, policy),
        );
        const next: CertData = { ...data, bundle: [ca.certPem, ...data.bundle], caKey: ca.keyPem };
        // With no usable serving certificate there is nothing to break: sign with the new CA at once.
        if (!usableServingCert(data, now, policy)) Object.assign(next, await this.#sign(next, now));
        const written = await this.#write(secret, next);
        if (!written) continue;
        secret = written;
        log.info("made a new CA", { secret: this.#options.secretName, trusted: next.bundle.length });
        data = next;
      }

      await this.#ensureConfigurations(data.bundle);

      if (needsNewServingCert(data, now, policy)) {
        const next = { ...data, ...(await this.#sign(data, now)) };
        if (!(await this.#write(secret, next))) continue;
        log.info("made a new serving certificate", { secret: this.#options.secretName });
        data = next;
      }
      return { serving: { certPem: data.cert!, keyPem: data.key! }, data };
    }
    throw new Error(
      `the Secret ${this.#options.namespace}/${this.#options.secretName} kept changing under us (${maxAttempts} conflicts)`,
    );
  }

  async #sign(data: CertData, now: number): Promise<{ cert: string; key: string }> {
    const ca = { certPem: data.bundle[0]!, keyPem: data.caKey! };
    const serving = await issueServingCert(
      ca,
      this.#options.policy.hosts,
      servingValidity(ca.certPem, now, this.#options.policy),
    );
    return { cert: serving.certPem, key: serving.keyPem };
  }

  async #readOrCreateSecret(): Promise<Secret> {
    const { namespace, secretName: name } = this.#options;
    const path = paths.secret(namespace, name);
    try {
      return await this.#client.get<Secret>(path);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      return await this.#client.create<Secret>(paths.secrets(namespace), {
        apiVersion: "v1",
        kind: "Secret",
        metadata: {
          name,
          namespace,
          labels: { "app.kubernetes.io/part-of": "snooze", "app.kubernetes.io/component": "webhooks" },
        },
        type: "Opaque",
        data: {},
      } satisfies Secret);
    } catch (error) {
      // Another replica created it first: use theirs.
      if (isConflict(error)) return this.#client.get<Secret>(path);
      throw error;
    }
  }

  /** Replaces the Secret's data if nobody changed it since `secret` was read; undefined on a conflict. */
  async #write(secret: Secret, data: CertData): Promise<Secret | undefined> {
    const { namespace, secretName: name, log } = this.#options;
    try {
      // The resourceVersion read with `secret` makes the replace conditional.
      return await this.#client.replace<Secret>(paths.secret(namespace, name), {
        ...secret,
        data: encode(data),
      });
    } catch (error) {
      if (!isConflict(error)) throw error;
      log.debug("another replica wrote the Secret first; reading it again", { secret: name });
      return undefined;
    }
  }

  /** Every webhook of both configurations trusts every live CA of the bundle. */
  async #ensureConfigurations(bundle: string[]): Promise<void> {
    const { validatingConfiguration, mutatingConfiguration } = this.#options;
    if (validatingConfiguration)
      await this.#ensureConfiguration("ValidatingWebhookConfiguration", validatingConfiguration, bundle);
    if (mutatingConfiguration)
      await this.#ensureConfiguration("MutatingWebhookConfiguration", mutatingConfiguration, bundle);
  }

  async #ensureConfiguration(kind: WebhookConfigurationKind, name: string, bundle: string[]): Promise<void> {
    const { log } = this.#options;
    const path = paths.webhookConfiguration(kind, name);
    for (let attempt = 1; attempt <= maxAttempts; attempt++) {
      let configuration: WebhookConfiguration;
      try {
        configuration = await this.#client.get<WebhookConfiguration>(path);
      } catch (error) {
        if (!isNotFound(error)) throw error;
        this.#warnOnce(
          `${kind}/${name}`,
          `${kind} ${name} does not exist; its CA bundle is written when it does`,
        );
        return;
      }
      if (configuration.metadata?.annotations?.[certManagerAnnotation]) {
        // cert-manager's CA injector owns this bundle: do not fight it.
        this.#warnOnce(
          `${kind}/${name}/cm`,
          `${kind} ${name} has ${certManagerAnnotation}; leaving its CA bundle to cert-manager`,
        );
        return;
      }
      const now = this.#now();
      let changed = false;
      for (const webhook of configuration.webhooks ?? []) {
        webhook.clientConfig ??= {};
        const clientConfig = webhook.clientConfig;
        const current = unb64(clientConfig.caBundle) ?? "";
        const merged = mergeBundles(splitPem(current), bundle, now).join("");
        if (merged !== current) {
          clientConfig.caBundle = b64(merged);
          changed = true;
        }
      }
      if (!changed) return;
      try {
        // Conditional on the resourceVersion just read: a 409 means read again and merge again.
        await this.#client.replace(path, configuration);
        log.info("wrote the CA bundle into the webhook configuration", { kind, name });
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
      }
    }
    throw new Error(`${kind} ${name} kept changing under us (${maxAttempts} conflicts)`);
  }

  #warnOnce(key: string, message: string) {
    if (this.#warned.has(key)) return;
    this.#warned.add(key);
    this.#options.log.warn(message);
  }
}
