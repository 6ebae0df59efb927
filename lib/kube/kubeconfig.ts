import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parse } from "yaml";
import { isObject } from "../json-object.ts";
import { redactUrl } from "../redact-url.ts";
import { maxPemFileBytes, readSmallFileSync } from "../small-file.ts";
import { bearerTokenProblem } from "./bearer-token.ts";

/** Where a component's identity comes from, for its start-up log line. */
export type KubeconfigSource = "flag" | "KUBECONFIG" | "in-cluster";

/**
 * The API server and the identity to use with it: what a kubeconfig's current context, or a pod's
 * ServiceAccount, comes down to. PEM text, not files, except the token file, which is read again
 * for every request (the kubelet rotates a projected ServiceAccount token).
 */
export interface KubeCredentials {
  server: string;
  /** CA certificates (PEM) that sign the server's certificate; absent: the system's trust store. */
  ca?: string;
  insecureSkipTlsVerify?: boolean;
  /** The name to check the server's certificate against, when it is not the server's host. */
  tlsServerName?: string;
  /** Client certificate and key (PEM). */
  cert?: string;
  key?: string;
  token?: string;
  tokenFile?: string;
  /** The context's namespace, or in-cluster the pod's own. */
  namespace?: string;
}

export const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

/**
 * The API server and identity a component talks with, chosen explicitly: `--kubeconfig` (for
 * development), else `$KUBECONFIG` (its first file that exists), else the pod's own ServiceAccount
 * (in-cluster: the token and CA mounted under /var/run/secrets/kubernetes.io/serviceaccount and
 * KUBERNETES_SERVICE_HOST). Anything else is an error rather than a guess (no silent fallback to
 * ~/.kube/config or localhost:8080, which would run a controller against the wrong cluster).
 */
export function loadKubeConfig(
  flag: string | undefined,
  env: Record<string, string | undefined> = process.env,
  saDir = serviceAccountDir,
): { kc: KubeCredentials; source: KubeconfigSource } {
  if (flag) return { kc: readKubeconfig(flag), source: "flag" };
  const listed = env.KUBECONFIG?.split(":").filter(Boolean) ?? [];
  const fromEnv = listed.find((path) => existsSync(path));
  if (fromEnv) return { kc: readKubeconfig(fromEnv), source: "KUBECONFIG" };
  const tokenPath = join(saDir, "token");
  if (env.KUBERNETES_SERVICE_HOST && existsSync(tokenPath))
    return { kc: inClusterCredentials(env, saDir), source: "in-cluster" };
  // Said by what was found of each: KUBECONFIG set to files that are not there was told to "set
  // KUBECONFIG" (found by a probe), and a pod without its token mounted to "run in a pod".
  const none = "no Kubernetes API to talk to";
  if (listed.length > 0)
    throw new Error(
      `${none}: KUBECONFIG names no file that exists (${listed.join(", ")}): pass --kubeconfig <file>, or set KUBECONFIG to a kubeconfig file`,
    );
  if (env.KUBERNETES_SERVICE_HOST)
    throw new Error(
      `${none}: this runs in a pod (KUBERNETES_SERVICE_HOST is set), but its ServiceAccount token ${tokenPath} is not there (automountServiceAccountToken: false?): mount it, or pass --kubeconfig <file>`,
    );
  throw new Error(
    `${none}: pass --kubeconfig <file>, set KUBECONFIG, or run in a pod with a ServiceAccount token`,
  );
}

/**
 * The text of a file a kubeconfig is or names, bounded and never blocking (readSmallFileSync): given
 * a named pipe, `--kubeconfig` hung the command for good, deaf to SIGTERM, and given /dev/zero it
 * read on until killed (found by an outside tester).
 */
const readCredentialFile = (path: string) => readSmallFileSync(path, maxPemFileBytes).toString("utf8");

/** A kubeconfig file's current context. Relative file names in it are relative to the file. */
export function readKubeconfig(path: string): KubeCredentials {
  let text: string;
  try {
    text = readCredentialFile(path);
  } catch (error) {
    throw new Error(`cannot read the kubeconfig ${path}: ${(error as Error).message}`);
  }
  return parseKubeconfig(text, { source: path, baseDir: dirname(resolve(path)) });
}

/** Fields of a kubeconfig that need code Snooze does not run; each is refused by name. */
const unsupportedUserFields: Record<string, string> = {
  exec: "exec credential plugins",
  "auth-provider": "auth-provider plugins",
  username: "basic authentication",
  password: "basic authentication",
  as: "impersonation",
  "as-uid": "impersonation",
  "as-groups": "impersonation",
  "as-user-extra": "impersonation",
};
const unsupportedClusterFields: Record<string, string> = { "proxy-url": "a proxy" };

const alternatives =
  "use a bearer token (token, tokenFile; e.g. from `kubectl create token <serviceaccount>`) or a client certificate";

/**
 * Parses kubeconfig YAML (or JSON) and resolves its current context: the cluster's server,
 * certificate-authority(-data), insecure-skip-tls-verify and tls-server-name; the user's token,
 * tokenFile, client-certificate(-data) and client-key(-data). Data fields win over file fields,
 * as with kubectl. Fields that need plugins (exec, auth-provider), basic auth, impersonation and
 * proxy-url are errors that name the field: ignoring them would talk as someone else, or not at all.
 */
export function parseKubeconfig(
  text: string,
  options: { source?: string; baseDir?: string } = {},
): KubeCredentials {
  const source = options.source ?? "kubeconfig";
  const baseDir = options.baseDir ?? process.cwd();
  const fail = (message: string): never => {
    throw new Error(`kubeconfig ${source}: ${message}`);
  };
  let document: unknown;
  try {
    document = parse(text);
  } catch (error) {
    return fail(`not valid YAML: ${(error as Error).message}`);
  }
  if (!isObject(document))
    return fail("not a kubeconfig (expected a mapping with clusters, users, contexts)");

  const contextName = document["current-context"];
  if (typeof contextName !== "string" || contextName === "") return fail("no current-context");
  const named = (list: string, name: string, field: string): Record<string, unknown> | undefined => {
    const entries = document[list];
    const entry = Array.isArray(entries) ? entries.find((e) => isObject(e) && e.name === name) : undefined;
    if (!isObject(entry)) return undefined;
    const value = entry[field];
    return isObject(value) ? value : {};
  };
  const context = named("contexts", contextName, "context");
  if (!context) return fail(`current-context "${contextName}" is not among its contexts`);
  const clusterName = context.cluster;
  if (typeof clusterName !== "string" || !clusterName)
    return fail(`context "${contextName}" names no cluster`);
  const cluster = named("clusters", clusterName, "cluster");
  if (!cluster) return fail(`cluster "${clusterName}" of context "${contextName}" is not among its clusters`);
  const userName = context.user;
  const user = typeof userName === "string" && userName ? named("users", userName, "user") : {};
  if (!user) return fail(`user "${String(userName)}" of context "${contextName}" is not among its users`);

  for (const [field, what] of Object.entries(unsupportedUserFields)) {
    if (present(user[field]))
      fail(
        `user "${String(userName)}" uses ${field} (${what}), which Snooze does not support; ${alternatives}`,
      );
  }
  for (const [field, what] of Object.entries(unsupportedClusterFields)) {
    if (present(cluster[field]))
      fail(`cluster "${clusterName}" uses ${field} (${what}), which Snooze does not support`);
  }

  const server = cluster.server;
  if (typeof server !== "string" || !server) return fail(`cluster "${clusterName}" has no server`);
  const serverProblem = serverUrlProblem(server);
  if (serverProblem) fail(`cluster "${clusterName}": server ${serverProblem}`);
  const string = (object: Record<string, unknown>, field: string, where: string): string | undefined => {
    const value = object[field];
    if (!present(value)) return undefined;
    if (typeof value !== "string") return fail(`${where}: ${field} must be a string`);
    return value;
  };
  const pem = (object: Record<string, unknown>, field: string, where: string): string | undefined => {
    const data = string(object, `${field}-data`, where);
    if (data !== undefined) return Buffer.from(data, "base64").toString("utf8");
    const file = string(object, field, where);
    if (file === undefined) return undefined;
    const path = resolve(baseDir, file);
    try {
      return readCredentialFile(path);
    } catch (error) {
      return fail(`${where}: cannot read ${field} ${path}: ${(error as Error).message}`);
    }
  };
  const clusterWhere = `cluster "${clusterName}"`;
  const userWhere = `user "${String(userName)}"`;
  const insecure = cluster["insecure-skip-tls-verify"];
  const cert = pem(user, "client-certificate", userWhere);
  const key = pem(user, "client-key", userWhere);
  if ((cert === undefined) !== (key === undefined))
    fail(`${userWhere} has a client certificate without its key, or a key without its certificate`);
  const tokenFile = string(user, "tokenFile", userWhere);
  const token = string(user, "token", userWhere);
  const tokenProblem = token === undefined ? undefined : bearerTokenProblem(token);
  if (tokenProblem) fail(`${userWhere}: token ${tokenProblem}`);
  const namespace = string(context, "namespace", `context "${contextName}"`);
  return compact({
    server,
    ca: pem(cluster, "certificate-authority", clusterWhere),
    insecureSkipTlsVerify: insecure === true || insecure === "true" ? true : undefined,
    tlsServerName: string(cluster, "tls-server-name", clusterWhere),
    cert,
    key,
    token,
    tokenFile: tokenFile === undefined ? undefined : resolve(baseDir, tokenFile),
    namespace,
  });
}

/**
 * The pod's own ServiceAccount: the API server at KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT,
 * the CA, token and namespace mounted in `dir`.
 */
export function inClusterCredentials(
  env: Record<string, string | undefined> = process.env,
  dir = serviceAccountDir,
): KubeCredentials {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port)
    throw new Error("in-cluster credentials need KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT");
  const tokenFile = join(dir, "token");
  if (!existsSync(tokenFile))
    throw new Error(`in-cluster credentials need the ServiceAccount token ${tokenFile}`);
  const read = (name: string) => {
    const path = join(dir, name);
    return existsSync(path) ? readCredentialFile(path) : undefined;
  };
  return compact({
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    ca: read("ca.crt"),
    tokenFile,
    namespace: read("namespace")?.trim() || undefined,
  });
}

/**
 * What is wrong with a kubeconfig's server, or undefined. Found by an outside tester: a server that
 * is no http(s) URL was taken, and the component then retried every request for ever with
 * `Invalid URL` or `unknown scheme`; one with a user name and password in it was logged whole at
 * start (and fetch refuses such a URL at each request, quoting it).
 */
function serverUrlProblem(server: string): string | undefined {
  const url = URL.canParse(server) ? new URL(server) : undefined;
  if (url?.protocol !== "http:" && url?.protocol !== "https:")
    return `"${redactUrl(server)}" is not an http(s) URL, such as https://10.0.0.1:6443`;
  if (url.username || url.password)
    return `"${redactUrl(server)}" carries a user name or password, which Snooze does not send; ${alternatives}`;
  return undefined;
}

/** A field that is set: kubeconfigs written by some tools carry `null` for what is not. */
const present = (value: unknown) => value !== undefined && value !== null && value !== "";

function compact<T extends object>(object: T): T {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as T;
}
