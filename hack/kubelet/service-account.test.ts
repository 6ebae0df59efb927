import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterEach, describe, expect, test, vi } from "vitest";
import { ManualClock } from "../../test/support/manual-clock.ts";
import type { PodNetwork } from "./pod-network.ts";
import { apiserverForPods, podCredentials } from "./service-account.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const caData = Buffer.from("-----BEGIN CERTIFICATE-----").toString("base64");
const kubeconfig = (server: string) => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // The stand-in API server below speaks plain HTTP, which client-node allows only so.
    clusters: [{ name: "c", server, ...(server.startsWith("http:") ? { skipTLSVerify: true } : { caData }) }],
    users: [{ name: "u", token: "kubelet" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
};
const network = (kind: "netns" | "loopback"): PodNetwork =>
  ({ kind, hostIP: "127.0.0.1" }) as unknown as PodNetwork;

describe("apiserverForPods: where a pod's processes reach the API server", () => {
  test("a pod in a network namespace of its own: through the node's pod-network address, to the API server's name", async () => {
    // The API server's port: what arrives there is echoed back.
    const echo = createServer((socket) => socket.pipe(socket));
    echo.listen(0, "127.0.0.1");
    await once(echo, "listening");
    cleanups.push(() => echo.close());
    const { port } = echo.address() as AddressInfo;
    const forwarded = await apiserverForPods(kubeconfig(`https://127.0.0.1:${port}`), network("netns"));
    cleanups.push(() => forwarded.close());
    const url = new URL(forwarded.server);
    expect(url.hostname).toBe("127.0.0.1");
    expect(Number(url.port)).not.toBe(port);
    expect(forwarded.tlsServerName).toBe("127.0.0.1");
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    socket.end("ping");
    let answer = "";
    for await (const chunk of socket) answer += chunk;
    expect(answer).toBe("ping");
  });

  test("pods on the host's network (loopback): the API server's own address", async () => {
    const direct = await apiserverForPods(kubeconfig("https://127.0.0.1:6443"), network("loopback"));
    expect(direct).toMatchObject({ server: "https://127.0.0.1:6443" });
    expect(direct.tlsServerName).toBeUndefined();
  });
});

describe("podCredentials: the pod's ServiceAccount token, as the kubelet projects it", () => {
  /** Tokens live an hour from `now`; while `failing`, the API server answers 503. */
  async function standInApiserver(now: () => number = Date.now) {
    const asked: { url: string; body: any }[] = [];
    const state = { failing: false };
    const server = createHttpServer(async (req, res) => {
      let body = "";
      for await (const chunk of req) body += chunk;
      asked.push({ url: req.url ?? "", body: JSON.parse(body || "{}") });
      res.setHeader("content-type", "application/json");
      if (state.failing) {
        res.statusCode = 503;
        res.end(JSON.stringify({ kind: "Status", status: "Failure", code: 503, message: "etcd is away" }));
        return;
      }
      res.end(
        JSON.stringify({
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenRequest",
          status: {
            token: `token-${asked.length}`,
            expirationTimestamp: new Date(now() + 3_600_000).toISOString(),
          },
        }),
      );
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(() => server.close());
    const kc = kubeconfig(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const dir = await mkdtemp(join(tmpdir(), "snooze-kubelet-sa-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    return { asked, kc, dir, state };
  }
  const pod = (spec: Record<string, unknown> = {}) =>
    ({
      metadata: { name: "adapter-1", namespace: "knative-eventing", uid: "uid-1" },
      spec: { serviceAccountName: "pingsource-mt-adapter", containers: [], ...spec },
    }) as unknown as V1Pod;

  test("a token bound to the pod, in a file a kubeconfig in KUBECONFIG names; gone with the pod", async () => {
    const { asked, kc, dir } = await standInApiserver();
    const apiserver = {
      server: "https://10.213.1.1:40000",
      tlsServerName: "127.0.0.1",
      close: async () => {},
    };
    const credentials = await podCredentials(kc.makeApiClient(CoreV1Api), kc, apiserver, pod(), {
      dir,
      onRefreshError: () => {},
    });
    expect(asked).toEqual([
      {
        url: "/api/v1/namespaces/knative-eventing/serviceaccounts/pingsource-mt-adapter/token",
        body: expect.objectContaining({
          spec: expect.objectContaining({
            boundObjectRef: { apiVersion: "v1", kind: "Pod", name: "adapter-1", uid: "uid-1" },
          }),
        }),
      },
    ]);
    const path = credentials!.env.KUBECONFIG!;
    const written = JSON.parse(readFileSync(path, "utf8"));
    expect(written.clusters[0].cluster).toMatchObject({
      server: "https://10.213.1.1:40000",
      "tls-server-name": "127.0.0.1",
      "insecure-skip-tls-verify": true,
    });
    expect(written.clusters[0].cluster["certificate-authority-data"]).toBeUndefined();
    expect(readFileSync(written.users[0].user.tokenFile, "utf8")).toBe("token-1");
    await credentials!.stop();
    expect(existsSync(path)).toBe(false);
  });

  test("none for a pod that says automountServiceAccountToken: false", async () => {
    const { asked, kc, dir } = await standInApiserver();
    const apiserver = { server: "https://127.0.0.1:6443", close: async () => {} };
    const none = await podCredentials(
      kc.makeApiClient(CoreV1Api),
      kc,
      apiserver,
      pod({ automountServiceAccountToken: false }),
      { dir, onRefreshError: () => {} },
    );
    expect(none).toBeUndefined();
    expect(asked).toEqual([]);
  });

  test("the token is made again at 80% of its life; a refresh that fails is retried in 10 s, the old token kept; none after the pod", async () => {
    const clock = new ManualClock();
    const { asked, kc, dir, state } = await standInApiserver(() => clock.now());
    const apiserver = { server: "https://127.0.0.1:6443", close: async () => {} };
    const errors: unknown[] = [];
    const credentials = await podCredentials(kc.makeApiClient(CoreV1Api), kc, apiserver, pod(), {
      dir,
      onRefreshError: (error) => errors.push(error),
      clock,
    });
    const tokenFile = JSON.parse(readFileSync(credentials!.env.KUBECONFIG!, "utf8")).users[0].user.tokenFile;
    const token = () => readFileSync(tokenFile, "utf8");
    expect(token()).toBe("token-1");
    // An hour's token: not before 48 minutes.
    clock.advance(2_880_000 - 1);
    await clock.settle();
    expect(asked).toHaveLength(1);
    clock.advance(1);
    await vi.waitFor(() => expect(token()).toBe("token-2"));
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    expect(clock.nextAt() - clock.now()).toBe(2_880_000);
    // The API server fails the next one: told, the old token kept, tried again 10 s later.
    state.failing = true;
    clock.advance(2_880_000);
    await vi.waitFor(() => expect(errors).toHaveLength(1));
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    expect(token()).toBe("token-2");
    expect(clock.nextAt() - clock.now()).toBe(10_000);
    state.failing = false;
    clock.advance(10_000);
    await vi.waitFor(() => expect(token()).toBe("token-4"));
    await vi.waitFor(() => expect(clock.pending).toBe(1));
    // Gone with the pod: no timer left, nothing more asked.
    await credentials!.stop();
    expect(clock.pending).toBe(0);
    clock.advance(10 * 3_600_000);
    await clock.settle();
    expect(asked).toHaveLength(4);
  });
});
