import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { credentials, loadPackageDefinition, type ServiceError, status } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../lib/log.ts";
import {
  type CertificateAuthority,
  createCA,
  type IssuedCert,
  issueCert,
} from "../../test/e2e/harness/certs.ts";
import { ExternalScalerServer, type ScalerTls } from "./external-scaler.ts";
import { type DemandSource, ModelDemand } from "./model-demand.ts";

/**
 * The gRPC port over TLS, as KEDA's external trigger reaches it with `caCert` (server TLS) and with
 * `tlsClientCert`/`tlsClientKey` (mutual TLS): real certificates (openssl), a real grpc-js client.
 */
const protoPath = fileURLToPath(new URL("./externalscaler.proto", import.meta.url));
const Client = (
  loadPackageDefinition(loadSync(protoPath, { keepCase: true, longs: Number, defaults: true })) as any
).externalscaler.ExternalScaler;

const source: DemandSource = {
  identity: "autoscaler-0",
  lookup: (key) => (key === "ml/qwen" ? { leading: true, load: { inFlight: 1, held: 2 } } : undefined),
  onLoad: () => () => {},
};
const ref = { name: "qwen", namespace: "ml", scalerMetadata: { model: "qwen", enableTLS: "true" } };

let dir: string;
let ca: CertificateAuthority;
let otherCa: CertificateAuthority;
let serving: IssuedCert;
let client: IssuedCert;
let stranger: IssuedCert;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "snooze-grpc-tls-"));
  ca = await createCA(dir, "scaler-ca");
  otherCa = await createCA(dir, "other-ca");
  serving = await issueCert(ca, dir, "serving", {
    commonName: "snooze-autoscaler",
    dnsNames: ["snooze-autoscaler.snooze-system.svc", "localhost"],
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  client = await issueCert(ca, dir, "keda", { commonName: "keda-operator", usage: "client" });
  stranger = await issueCert(otherCa, dir, "stranger", { commonName: "stranger", usage: "client" });
}, 30_000);
afterAll(() => rm(dir, { recursive: true, force: true }));

async function serve(tls: ScalerTls) {
  const server = new ExternalScalerServer({
    demand: new ModelDemand({ source, log: silentLogger }),
    perReplica: () => 1,
    log: silentLogger,
    registry: new Registry(),
  });
  const port = await server.listen("127.0.0.1", 0, tls);
  return { server, address: `127.0.0.1:${port}` };
}

/** IsActive with these channel credentials: the answer, or the gRPC status it failed with. */
function isActive(address: string, channel: ReturnType<typeof credentials.createSsl>) {
  const c = new Client(address, channel, { "grpc.initial_reconnect_backoff_ms": 50 });
  return new Promise<{ result?: boolean; code?: number }>((resolve) =>
    c.IsActive(
      ref,
      { deadline: Date.now() + 3_000 },
      (error: ServiceError | null, value: { result: boolean }) => {
        c.close();
        resolve(error ? { code: error.code } : { result: value.result });
      },
    ),
  );
}

const pem = (text: string) => Buffer.from(text);

describe("the external scaler over TLS", () => {
  it("serves TLS with the given certificate: a client trusting its CA is answered; plaintext and other CAs are not", async () => {
    const { server, address } = await serve({ cert: pem(serving.certPem), key: pem(serving.keyPem) });
    try {
      expect(await isActive(address, credentials.createSsl(pem(ca.certPem)))).toEqual({ result: true });
      expect(await isActive(address, credentials.createInsecure())).toEqual({ code: status.UNAVAILABLE });
      expect(await isActive(address, credentials.createSsl(pem(otherCa.certPem)))).toEqual({
        code: status.UNAVAILABLE,
      });
    } finally {
      await server.close(100);
    }
  });

  it("with a client CA, requires a client certificate it signed (mutual TLS)", async () => {
    const { server, address } = await serve({
      cert: pem(serving.certPem),
      key: pem(serving.keyPem),
      clientCa: pem(ca.certPem),
    });
    try {
      const trust = pem(ca.certPem);
      expect(
        await isActive(address, credentials.createSsl(trust, pem(client.keyPem), pem(client.certPem))),
      ).toEqual({ result: true });
      expect(await isActive(address, credentials.createSsl(trust))).toEqual({ code: status.UNAVAILABLE });
      expect(
        await isActive(address, credentials.createSsl(trust, pem(stranger.keyPem), pem(stranger.certPem))),
      ).toEqual({ code: status.UNAVAILABLE });
    } finally {
      await server.close(100);
    }
  });
});
