import { Registry } from "prom-client";
import { silentLogger } from "../../../lib/log.ts";
import { type CertificatePem, createCA, issueServingCert } from "../../../webhooks/certs/x509.ts";
import type { WebhookDeps } from "../../../webhooks/handlers.ts";
import { webhookMetrics } from "../../../webhooks/metrics.ts";
import {
  startWebhookServer,
  type WebhookServer,
  type WebhookServerOptions,
} from "../../../webhooks/server.ts";
import { FakeClusterReader } from "./fake-cluster.ts";
import { fakeClaims } from "./fake-leases.ts";

/** What the webhook server's tests start with: a server on 127.0.0.1 and the CA its certificate is signed by. */
export interface TestWebhookServer {
  server: WebhookServer;
  ca: CertificatePem;
  registry: Registry;
}

/** The autoscaler the webhooks let write slot members, as config/ names it. */
export const testAutoscaler = {
  username: "system:serviceaccount:snooze-system:snooze-autoscaler",
  leaseNamespace: "snooze-system",
};

/**
 * A webhook server on a free port of 127.0.0.1, serving a certificate for it from a new CA (valid
 * from a minute ago for an hour), with a fake cluster and claims unless `deps` gives others, and the
 * settings each test gives.
 */
export async function startTestWebhookServer(
  options: Pick<WebhookServerOptions, "maxBodyBytes" | "decisionTimeoutMs"> &
    Partial<Omit<WebhookServerOptions, "deps">> & { deps?: Partial<WebhookDeps>; caName?: string },
): Promise<TestWebhookServer> {
  const { deps, caName, ...settings } = options;
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  const ca = await createCA(caName ?? "test-ca", validity);
  const registry = new Registry();
  const server = await startWebhookServer({
    host: "127.0.0.1",
    port: 0,
    tls: await issueServingCert(ca, ["127.0.0.1"], validity),
    registry,
    metrics: webhookMetrics(registry),
    log: silentLogger,
    ready: () => true,
    ...settings,
    deps: { cluster: new FakeClusterReader(), autoscaler: testAutoscaler, claims: fakeClaims(), ...deps },
  });
  return { server, ca, registry };
}
