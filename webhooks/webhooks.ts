import type { KubeClient } from "../lib/kube/client.ts";
import type { Logger } from "../lib/log.ts";
import { Registry } from "../lib/prometheus.ts";
import { FileCertificates, SelfManagedCertificates } from "./certs/sources.ts";
import { certificateFacts, createCA, issueServingCert } from "./certs/x509.ts";
import { KubeClusterReader } from "./cluster.ts";
import { webhookMetrics } from "./metrics.ts";
import { startWebhookServer, type TlsPair, type WebhookServer } from "./server.ts";
import { KubeClaimStore } from "./slot-claims.ts";
import type { AutoscalerIdentity } from "./slot-residency.ts";

export type CertificateMode =
  | {
      mode: "self";
      namespace: string;
      secretName: string;
      validatingConfiguration: string;
      mutatingConfiguration: string;
      hosts: string[];
      caValidityMs: number;
      certValidityMs: number;
      resyncMs: number;
    }
  | { mode: "files"; certPath: string; keyPath: string; reloadMs: number };

export interface WebhooksOptions {
  host: string;
  port: number;
  reusePort?: boolean;
  /** The API the caches, fresh reads and certificates use (closed by `close()`). */
  client: KubeClient;
  certificates: CertificateMode;
  autoscaler: AutoscalerIdentity;
  /**
   * Where the slots' admission claims (Leases) are kept: a namespace of their own
   * (snooze-slot-claims), so that the webhooks' write rights on Leases, which RBAC cannot limit to
   * names, do not reach the autoscaler's Leases.
   */
  claimNamespace: string;
  maxBodyBytes: number;
  decisionTimeoutMs: number;
  /** How often claims left behind (their writer gone) are deleted. Default 1 min. */
  claimCollectMs?: number;
  log: Logger;
}

export interface RunningWebhooks {
  server: WebhookServer;
  registry: Registry;
  /** Resolves when the caches are synced and the real certificate is served. */
  ready: Promise<void>;
  close(graceMs?: number): Promise<void>;
}

/**
 * `snooze webhooks`: the HTTPS server starts at once with a throwaway certificate (so /healthz
 * answers), and reports ready once the Model and Slot caches are synced and the real certificate,
 * self-managed or from files, is loaded.
 */
export async function startWebhooks(options: WebhooksOptions): Promise<RunningWebhooks> {
  const { log } = options;
  const { client } = options;
  const registry = new Registry();
  const metrics = webhookMetrics(registry);
  const cluster = new KubeClusterReader(client, log);
  const claims = new KubeClaimStore(client, options.claimNamespace);
  // Claims whose writer was gone before their window passed would stay forever (one per slot ever
  // raced for, a Slot deleted or not): every replica deletes those it has seen end.
  const collecting = setInterval(() => {
    claims
      .collect()
      .then((deleted) => {
        if (deleted > 0) log.info("deleted admission claims left behind", { deleted });
      })
      .catch((error: unknown) => log.warn("could not collect admission claims", { error: String(error) }));
  }, options.claimCollectMs ?? 60_000);
  collecting.unref();
  let certificateLoaded = false;

  const server = await startWebhookServer({
    host: options.host,
    port: options.port,
    reusePort: options.reusePort,
    tls: await throwawayCertificate(),
    deps: {
      cluster,
      autoscaler: options.autoscaler,
      claims,
    },
    registry,
    metrics,
    log,
    maxBodyBytes: options.maxBodyBytes,
    decisionTimeoutMs: options.decisionTimeoutMs,
    ready: () => certificateLoaded && cluster.synced,
  });
  log.info("listening", { url: server.url });

  const certs = options.certificates;
  const source =
    certs.mode === "self"
      ? new SelfManagedCertificates({
          client,
          namespace: certs.namespace,
          secretName: certs.secretName,
          validatingConfiguration: certs.validatingConfiguration || undefined,
          mutatingConfiguration: certs.mutatingConfiguration || undefined,
          policy: {
            caValidityMs: certs.caValidityMs,
            certValidityMs: certs.certValidityMs,
            hosts: certs.hosts,
          },
          resyncMs: certs.resyncMs,
          log,
        })
      : new FileCertificates({
          certPath: certs.certPath,
          keyPath: certs.keyPath,
          reloadMs: certs.reloadMs,
          log,
        });

  const use = (tls: TlsPair) => {
    server.setCertificate(tls);
    const facts = certificateFacts(tls.certPem);
    if (facts) metrics.certificateExpiry.set(facts.notAfter / 1000);
    metrics.certificateReloads.inc();
  };
  const abort = new AbortController();
  const ready = (async () => {
    await Promise.all([
      cluster.start(),
      source.initial(abort.signal).then((tls) => {
        use(tls);
        certificateLoaded = true;
        source.watch(use);
      }),
    ]);
    log.info("ready", { url: server.url, certificates: certs.mode });
  })();
  ready.catch((error: unknown) => log.error("could not get ready", { error: String(error) }));

  return {
    server,
    registry,
    ready,
    async close(graceMs) {
      abort.abort();
      source.stop();
      await server.close(graceMs);
      // Claims written here and not yet ended end a window after other replicas first read them.
      clearInterval(collecting);
      claims.close();
      await cluster.stop().catch(() => {});
      await client.close();
    },
  };
}

/** A certificate nobody trusts, to answer /healthz before the real one is there. */
async function throwawayCertificate(): Promise<TlsPair> {
  const now = Date.now();
  const validity = { notBefore: new Date(now - 60_000), notAfter: new Date(now + 3_600_000) };
  const ca = await createCA("snooze-webhooks-bootstrap", validity);
  return issueServingCert(ca, ["localhost"], validity);
}
