import { writeFile } from "node:fs/promises";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { type CertificateAuthority, issueCert } from "./certs.ts";

/** Where a client connects and which CA it trusts. */
export interface ClusterEndpoint {
  server: string;
  /** PEM of the CA that signed the serving certificate. */
  caPem: string;
}

/** Credentials: a client certificate, or a bearer token. */
export type Credentials = { certPem: string; keyPem: string } | { token: string };

const b64 = (text: string) => Buffer.from(text).toString("base64");

/** A kubeconfig with one cluster, one user and one context, current. */
export function kubeconfigFor(
  endpoint: ClusterEndpoint,
  userName: string,
  credentials: Credentials,
): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "snooze-e2e", server: endpoint.server, caData: b64(endpoint.caPem) }],
    users: [
      "token" in credentials
        ? { name: userName, token: credentials.token }
        : { name: userName, certData: b64(credentials.certPem), keyData: b64(credentials.keyPem) },
    ],
    contexts: [{ name: userName, cluster: "snooze-e2e", user: userName }],
    currentContext: userName,
  });
  return kc;
}

/** Writes a kubeconfig for kubectl and the other binaries (JSON is valid kubeconfig YAML). */
export async function writeKubeconfig(path: string, kc: KubeConfig): Promise<string> {
  await writeFile(path, kc.exportConfig(), { mode: 0o600 });
  return path;
}

/**
 * A kubeconfig that authenticates as `user` in `groups` with a client certificate from the
 * apiserver's client CA: the request is then authorized exactly as that user's RBAC allows.
 */
export async function mintUserKubeconfig(
  endpoint: ClusterEndpoint,
  clientCA: CertificateAuthority,
  dir: string,
  user: string,
  groups: string[] = [],
): Promise<KubeConfig> {
  const fileName = `user-${user.replace(/[^a-zA-Z0-9-]/g, "_")}`;
  const cert = await issueCert(clientCA, dir, fileName, {
    commonName: user,
    organizations: groups,
    usage: "client",
  });
  return kubeconfigFor(endpoint, user, cert);
}

/**
 * A kubeconfig that authenticates as the ServiceAccount `namespace/name` with a short-lived token
 * from the TokenRequest API, the same kind of token a pod of that ServiceAccount gets mounted.
 * Works against the test control plane and any real cluster the admin can request tokens on.
 */
export async function mintServiceAccountKubeconfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
  expirationSeconds = 3_600,
): Promise<KubeConfig> {
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error("the admin kubeconfig has no current cluster");
  const core = admin.makeApiClient(CoreV1Api);
  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds } },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`no token issued for ServiceAccount ${namespace}/${name}`);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: `system:serviceaccount:${namespace}:${name}`, token }],
    contexts: [{ name: "sa", cluster: cluster.name, user: `system:serviceaccount:${namespace}:${name}` }],
    currentContext: "sa",
  });
  return kc;
}
