import { join } from "node:path";
import { Agent, fetch as undiciFetch } from "undici";
import {
  type CertificateAuthority,
  createCA,
  createServiceAccountKey,
  type IssuedCert,
  issueCert,
} from "./certs.ts";
import { freePort } from "./ports.ts";
import { type ManagedProcess, startProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

export interface ApiServer {
  /** https://127.0.0.1:<port> */
  url: string;
  /** Signs the serving certificate: what clients trust. */
  servingCA: CertificateAuthority;
  /** Signs client certificates: the apiserver authenticates their CN as user and O as groups. */
  clientCA: CertificateAuthority;
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
 */
export async function startApiServer(binDir: string, dir: string, etcdUrl: string): Promise<ApiServer> {
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const servingCA = await createCA(dir, "serving-ca");
  const clientCA = await createCA(dir, "client-ca");
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
      // The "kubernetes" Service would point at 127.0.0.1, which Endpoints validation refuses.
      "--endpoint-reconciler-type=none",
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
  return { url, servingCA, clientCA, serviceAccountKey, admin, process, stop: () => process.stop() };
}
