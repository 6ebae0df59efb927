import { join } from "node:path";
import { Agent, fetch as undiciFetch } from "undici";
import { freePort } from "../../../lib/free-port.ts";
import {
  type CertificateAuthority,
  createCA,
  createServiceAccountKey,
  type IssuedCert,
  issueCert,
} from "./certs.ts";
import { type ManagedProcess, startProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

export interface ApiServer {
  /** https://127.0.0.1:<port> */
  url: string;
  /** Signs the serving certificate: what clients trust. */
  servingCA: CertificateAuthority;
  /** Signs client certificates: the apiserver authenticates their CN as user and O as groups. */
  clientCA: CertificateAuthority;
  /**
   * Signs the aggregator's proxy client certificate (front-proxy-client): extension API servers
   * (KEDA's metrics adapter) trust the X-Remote-User headers of requests that carry it. The
   * apiserver publishes it in kube-system/extension-apiserver-authentication.
   */
  frontProxyCA: CertificateAuthority;
  /** Signs and verifies ServiceAccount tokens. */
  serviceAccountKey: { privatePath: string; publicPath: string };
  /** A system:masters client certificate (the admin identity). */
  admin: IssuedCert;
  process: ManagedProcess;
  stop(): Promise<void>;
}

/**
 * kube-apiserver on loopback, configured the way controller-runtime's envtest does: generated CA and
 * serving certificate, client-certificate authentication, RBAC authorization, ServiceAccount
 * signing keys. Unlike envtest the ServiceAccount admission plugin stays on, because the
 * controller-manager started next to it creates the default ServiceAccounts and their tokens.
 * The aggregation layer is set up as kubeadm does (request-header CA, proxy client certificate), and
 * routes to an APIService's endpoints (EndpointSlices) instead of its Service's cluster IP, since
 * nothing here routes cluster IPs.
 */
export async function startApiServer(binDir: string, dir: string, etcdUrl: string): Promise<ApiServer> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const servingCA = await createCA(dir, "serving-ca");
  const clientCA = await createCA(dir, "client-ca");
  const frontProxyCA = await createCA(dir, "front-proxy-ca");
  const frontProxyClient = await issueCert(frontProxyCA, dir, "front-proxy-client", {
    commonName: "front-proxy-client",
    usage: "client",
  });
  const serving = await issueCert(servingCA, dir, "apiserver", {
    commonName: "kube-apiserver",
    ipAddresses: ["127.0.0.1"],
    dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
    usage: "server",
  });
  const admin = await issueCert(clientCA, dir, "admin", {
    commonName: "snooze-e2e-admin",
    organizations: ["system:masters"],
    usage: "client",
  });
  const serviceAccountKey = await createServiceAccountKey(dir);
  const process = startProcess(
    "kube-apiserver",
    join(binDir, "kube-apiserver"),
    [
      `--etcd-servers=${etcdUrl}`,
      `--bind-address=127.0.0.1`,
      `--advertise-address=127.0.0.1`,
      `--secure-port=${port}`,
      `--cert-dir=${dir}`,
      `--tls-cert-file=${serving.certPath}`,
      `--tls-private-key-file=${serving.keyPath}`,
      `--client-ca-file=${clientCA.certPath}`,
      "--authorization-mode=RBAC",
      // Services get addresses from this range, but nothing here routes to it: no kube-proxy.
      "--service-cluster-ip-range=10.0.0.0/24",
      "--allow-privileged=true",
      `--service-account-issuer=${url}`,
      `--service-account-key-file=${serviceAccountKey.publicPath}`,
      `--service-account-signing-key-file=${serviceAccountKey.privatePath}`,
      // The signing keys as a pod fetches them (its OIDC discovery names this): through the
      // `kubernetes` Service, which the stand-in kubelet's Service router sends to this apiserver.
      // Left to itself the document would name the advertise address, 127.0.0.1: the pod's own
      // loopback. Knative Eventing's token verifier (a Broker's ingress) reads it.
      "--service-account-jwks-uri=https://kubernetes.default.svc/openid/v1/jwks",
      // The "kubernetes" Service would point at 127.0.0.1, which Endpoints validation refuses.
      "--endpoint-reconciler-type=none",
      `--requestheader-client-ca-file=${frontProxyCA.certPath}`,
      "--requestheader-allowed-names=front-proxy-client",
      "--requestheader-username-headers=X-Remote-User",
      "--requestheader-group-headers=X-Remote-Group",
      "--requestheader-extra-headers-prefix=X-Remote-Extra-",
      `--proxy-client-cert-file=${frontProxyClient.certPath}`,
      `--proxy-client-key-file=${frontProxyClient.keyPath}`,
      "--enable-aggregator-routing=true",
    ],
    { logPath: join(dir, "kube-apiserver.log") },
  );
  const dispatcher = new Agent({
    connect: { ca: servingCA.certPem, cert: admin.certPem, key: admin.keyPem },
  });
  try {
    await waitFor(
      async () => {
        const response = await undiciFetch(`${url}/readyz`, {
          dispatcher,
          signal: AbortSignal.timeout(5_000),
        });
        await response.text();
        return response.ok ? true : undefined;
      },
      {
        what: "kube-apiserver /readyz",
        timeoutMs: 120_000,
        intervalMs: 250,
        abort: process.exited,
        detail: () => process.tail(),
      },
    );
  } finally {
    await dispatcher.close();
  }
  return {
    url,
    servingCA,
    clientCA,
    frontProxyCA,
    serviceAccountKey,
    admin,
    process,
    stop: () => process.stop(),
  };
}
