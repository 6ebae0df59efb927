import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { Agent, type Dispatcher, fetch } from "undici";
import { maxTokenFileBytes, readSmallFileSync } from "../small-file.ts";
import { bearerTokenProblem } from "./bearer-token.ts";
import { type KubeCredentials, parseKubeconfig } from "./kubeconfig.ts";

/** An answer of the API server that is not 2xx, with its Status reason (`Conflict`, `NotFound`, ...). */
export class KubeError extends Error {
  readonly status: number;
  readonly reason: string;
  /** The API server's own message (the Status object's), without the request before it. */
  readonly detail: string;
  constructor(status: number, reason: string, message: string, detail = message) {
    super(message);
    this.name = "KubeError";
    this.status = status;
    this.reason = reason;
    this.detail = detail;
  }
}

export const isConflict = (error: unknown) => error instanceof KubeError && error.status === 409;
export const isNotFound = (error: unknown) => error instanceof KubeError && error.status === 404;
export const isGone = (error: unknown) => error instanceof KubeError && error.status === 410;
/** 422: the API server refuses the object as it is (its schema or validation rules). */
export const isInvalid = (error: unknown) => error instanceof KubeError && error.status === 422;

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: {
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
    }[];
  };
}

export interface KubeList<T> {
  metadata: { resourceVersion: string; continue?: string };
  items: T[];
}

export interface WatchEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T;
}

export type PatchType = "merge" | "json" | "strategic";

/**
 * How long a request may take, when it must not take the client's default 30 s (a Lease's renew
 * must end by its renew deadline), and a signal that gives it up.
 */
export interface RequestLimits {
  timeoutMs?: number;
  signal?: AbortSignal;
}
const patchContentType: Record<PatchType, string> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

/** Anything that can print itself as kubeconfig, such as client-node's KubeConfig in tests. */
export interface ExportableKubeconfig {
  exportConfig(): string;
}

/**
 * A small client for the Kubernetes REST API: JSON in, JSON out, over one keep-alive connection
 * pool. Objects stay plain JSON (client-node's typed models drop fields they do not know, such as
 * a CRD's `default`), errors carry the HTTP status, and watches stream line by line.
 * Credentials come from `KubeCredentials` (lib/kube/kubeconfig.ts); a token file is read again per
 * request, so a projected ServiceAccount token that the kubelet rotates keeps working.
 */
export interface KubeClientOptions {
  /**
   * Who writes (`snooze-autoscaler`): the `fieldManager` of every create, replace and patch, and the
   * User-Agent the API server's audit log shows. Without it the API server names the manager after
   * the HTTP library (`undici`), so a server-side apply's conflict over a Deployment's
   * `spec.replicas` named nobody a person would know as Snooze (found by a probe).
   */
  fieldManager?: string;
  /**
   * How often the one HTTP/2 connection every call and watch shares is pinged; one not answered by
   * the next ping is dropped, and the calls after it get a new connection. undici's default, a
   * minute, left a connection that went silent (a relay or load balancer that lost it, a peer that
   * hung) holding every Lease call, TokenReview and watch for one to two minutes: leadership lost
   * and watches stale all that time. client-go finds one in 30–45 s (ReadIdleTimeout, PingTimeout).
   */
  pingIntervalMs?: number;
}

/** The ping interval of the API server's connection: a silent one is dropped within 10–20 s. */
const apiServerPingIntervalMs = 10_000;

export class KubeClient {
  readonly server: string;
  private readonly credentials: KubeCredentials;
  private readonly dispatcher: Dispatcher;
  private readonly fieldManager?: string;

  constructor(credentials: KubeCredentials, options: KubeClientOptions = {}) {
    this.credentials = credentials;
    this.fieldManager = options.fieldManager;
    this.server = credentials.server.replace(/\/$/, "");
    this.dispatcher = new Agent({
      connect: {
        ca: credentials.ca,
        cert: credentials.cert,
        key: credentials.key,
        rejectUnauthorized: !credentials.insecureSkipTlsVerify,
        servername: credentials.tlsServerName,
      },
      keepAliveTimeout: 30_000,
      h2Options: { pingInterval: options.pingIntervalMs ?? apiServerPingIntervalMs },
    });
  }

  /** A client for loaded credentials, or for the current context of an exportable kubeconfig. */
  static async fromKubeConfig(
    kc: KubeCredentials | ExportableKubeconfig,
    options: KubeClientOptions = {},
  ): Promise<KubeClient> {
    const credentials =
      "exportConfig" in kc ? parseKubeconfig(kc.exportConfig(), { source: "(in memory)" }) : kc;
    return new KubeClient(credentials, options);
  }

  private async headers(contentType?: string): Promise<Record<string, string>> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.fieldManager) headers["user-agent"] = this.fieldManager;
    const token = await this.bearerToken();
    if (token) headers.authorization = `Bearer ${token}`;
    if (contentType) headers["content-type"] = contentType;
    return headers;
  }

  /**
   * The bearer token: the token file's current content (as client-go, it wins over `token`);
   * undefined with a client certificate. Also what a component shows another to say who it is
   * (the autoscaler reviews it with a TokenReview).
   */
  async bearerToken(): Promise<string | undefined> {
    const { tokenFile } = this.credentials;
    if (!tokenFile) return this.credentials.token;
    let token: string;
    try {
      // Bounded and never blocking (found by an outside tester): read with readFile, a named pipe kept
      // a thread of libuv's pool (four in all) waiting for good at each request, and /dev/zero was
      // read on and on.
      token = readSmallFileSync(tokenFile, maxTokenFileBytes).toString("utf8").trim();
    } catch (error) {
      throw new Error(`cannot read the token file ${tokenFile}: ${(error as Error).message}`);
    }
    const problem = bearerTokenProblem(token);
    if (problem) throw new Error(`the token file ${tokenFile} ${problem}`);
    return token;
  }

  async request<T>(
    method: string,
    path: string,
    options: {
      body?: unknown;
      contentType?: string;
      query?: Record<string, string>;
      timeoutMs?: number;
      /** Gives the request up (a reader that stops), besides the timeout. */
      signal?: AbortSignal;
    } = {},
  ): Promise<T> {
    const url = new URL(this.server + path);
    if (this.fieldManager && writes.has(method)) url.searchParams.set("fieldManager", this.fieldManager);
    for (const [key, value] of Object.entries(options.query ?? {})) url.searchParams.set(key, value);
    const hasBody = options.body !== undefined;
    const response = await fetch(url, {
      method,
      headers: await this.headers(hasBody ? (options.contentType ?? "application/json") : undefined),
      body: hasBody ? JSON.stringify(options.body) : undefined,
      dispatcher: this.dispatcher,
      signal: options.signal
        ? AbortSignal.any([AbortSignal.timeout(options.timeoutMs ?? 30_000), options.signal])
        : AbortSignal.timeout(options.timeoutMs ?? 30_000),
    });
    const text = await response.text();
    if (!response.ok) throw errorFrom(response.status, text, `${method} ${path}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T>(path: string, limits?: RequestLimits): Promise<T> {
    return this.request<T>("GET", path, { ...limits });
  }

  list<T>(path: string, query: Record<string, string> = {}, signal?: AbortSignal): Promise<KubeList<T>> {
    return this.request<KubeList<T>>("GET", path, { query, ...(signal ? { signal } : {}) });
  }

  create<T>(path: string, body: unknown, limits?: RequestLimits): Promise<T> {
    return this.request<T>("POST", path, { body, ...limits });
  }

  /** A full replace: the body's metadata.resourceVersion makes it conditional (409 when stale). */
  replace<T>(path: string, body: unknown, limits?: RequestLimits): Promise<T> {
    return this.request<T>("PUT", path, { body, ...limits });
  }

  /** A JSON merge patch (default): with metadata.resourceVersion in it, it is conditional too. */
  patch<T>(path: string, body: unknown, type: PatchType = "merge"): Promise<T> {
    return this.request<T>("PATCH", path, { body, contentType: patchContentType[type] });
  }

  delete<T>(path: string, body?: unknown, limits?: RequestLimits): Promise<T> {
    return this.request<T>("DELETE", path, { body, ...limits });
  }

  /**
   * Streams watch events of `path` from `resourceVersion` until the server closes the stream,
   * the signal aborts, or an error. Resolves when the stream ends; rejects on HTTP errors.
   */
  async watch<T>(
    path: string,
    query: Record<string, string>,
    onEvent: (event: WatchEvent<T>) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const url = new URL(this.server + path);
    for (const [key, value] of Object.entries({ ...query, watch: "true" })) url.searchParams.set(key, value);
    const response = await fetch(url, {
      headers: await this.headers(),
      dispatcher: this.dispatcher,
      signal,
    });
    if (!response.ok || !response.body) {
      throw errorFrom(response.status, await response.text(), `watch ${path}`);
    }
    const lines = createInterface({ input: Readable.fromWeb(response.body as never), crlfDelay: Infinity });
    try {
      for await (const line of lines) {
        if (!line.trim()) continue;
        onEvent(JSON.parse(line) as WatchEvent<T>);
      }
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
  }

  /**
   * Closes the connections: requests in flight get `graceMs` to finish, then are cut. At shutdown a
   * request nobody waits for any more (a certificate setup against an API server that never
   * answers) would otherwise hold the process for its whole timeout.
   */
  async close(graceMs = 1_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), graceMs);
    });
    const closed = await Promise.race([this.dispatcher.close().catch(() => {}), late]);
    clearTimeout(timer);
    if (closed === "late") await this.dispatcher.destroy().catch(() => {});
  }
}

/** The methods that write an object, and so name a field manager. */
const writes = new Set(["POST", "PUT", "PATCH"]);

function errorFrom(status: number, text: string, what: string): KubeError {
  let reason = "";
  let message = text.slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { reason?: string; message?: string };
    reason = parsed.reason ?? "";
    message = parsed.message ?? message;
  } catch {
    // not a Status object
  }
  return new KubeError(status, reason, `${what}: ${status} ${reason}: ${message}`, message);
}

/** REST paths, so callers never concatenate them by hand. */
export const paths = {
  pods: (namespace?: string) => (namespace ? `/api/v1/namespaces/${namespace}/pods` : "/api/v1/pods"),
  pod: (namespace: string, name: string) => `/api/v1/namespaces/${namespace}/pods/${name}`,
  custom: (group: string, version: string, plural: string, namespace?: string) =>
    namespace
      ? `/apis/${group}/${version}/namespaces/${namespace}/${plural}`
      : `/apis/${group}/${version}/${plural}`,
  apps: (plural: string, namespace?: string) =>
    namespace ? `/apis/apps/v1/namespaces/${namespace}/${plural}` : `/apis/apps/v1/${plural}`,
  leases: (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
  lease: (namespace: string, name: string) =>
    `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`,
  configMaps: (namespace: string) => `/api/v1/namespaces/${namespace}/configmaps`,
  secrets: (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`,
  secret: (namespace: string, name: string) => `/api/v1/namespaces/${namespace}/secrets/${name}`,
  webhookConfiguration: (kind: WebhookConfigurationKind, name: string) =>
    `/apis/admissionregistration.k8s.io/v1/${kind.toLowerCase()}s/${name}`,
  crd: (name: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
};

export type WebhookConfigurationKind = "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration";
